// Command scale runs N gopherpace replicas in one process, each with its
// own memberlist on loopback, and drives them at a multiple of their
// shared limit with Poisson arrivals spread evenly over the replicas. It
// prints the total admitted against R·t+B, every replica's admit ratio
// against the cluster's, and what each replica sent its peers, counted by
// the memberlist transport (datagrams) and by the limiter (frame bytes).
// The simulator's figures for the same N are in docs/accuracy.md#scale.
//
//	make scale                      # 50 replicas, 10 s
//	go run ./scale -nodes 30        # from examples/
//
// Every replica runs in this process on the machine's cores: at 50
// replicas, memberlist's own probes and the limiters' datagrams are
// tens of thousands of loopback datagrams a second, so on a small
// machine the run measures the machine as much as the limiter (it says
// how far its load generator fell behind).
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/examples/internal/loopback"
)

func main() {
	nodes := flag.Int("nodes", 50, "replicas, each with its own memberlist on loopback")
	rate := flag.Int64("rate", 1000, "cluster-wide limit, requests per second (the bucket holds as many)")
	mult := flag.Float64("load", 5, "offered load as a multiple of the limit")
	duration := flag.Duration("duration", 10*time.Second, "how long the load runs")
	interval := flag.Duration("interval", gopherpace.DefaultGossipInterval, "the limiters' gossip interval (WithGossipInterval)")
	flag.Parse()
	if err := run(*nodes, *rate, *mult, *duration, *interval); err != nil {
		log.Fatal(err)
	}
}

func run(n int, rate int64, mult float64, d, interval time.Duration) error {
	if n < 2 || n > 200 || rate < 1 || rate > 100_000 || mult <= 0 || mult > 20 || d < time.Second || d > 2*time.Minute {
		return errors.New("nodes must be 2..200, rate 1..100000, load 0..20, duration 1s..2m")
	}
	// Quiet: at shutdown memberlist logs the pings it can no longer send.
	logger := slog.New(slog.DiscardHandler)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("replica-%03d", i)
	}
	c, err := loopback.Start(names, rate, logger, gopherpace.WithGossipInterval(interval))
	if err != nil {
		return err
	}
	defer c.Close()
	transports, limiters := c.Transports, c.Limiters
	fmt.Printf("%d replicas on loopback, one memberlist each; limit %d/s, bucket %d; offered %.0f/s as Poisson arrivals, evenly; gossip interval %v\n",
		n, rate, rate, mult*float64(rate), interval)
	start := time.Now()
	// Formed: every memberlist lists every node, and every limiter knows
	// them all. (Every limiter hearing every other within one isolation
	// timeout at the same instant is too much to ask of 2 cores carrying
	// N memberlists.)
	for deadline := start.Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		formed, least := true, int64(n)
		for i, l := range limiters {
			st := l.Stats()
			least = min(least, st.KnownNodes)
			formed = formed && st.KnownNodes == int64(n) && transports[i].Stats().Members == n
		}
		if formed {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the replicas did not all know each other within 2 minutes (the least known: %d of %d)", least, n)
		}
	}
	fmt.Printf("formed in %v: every replica knows every other\n", time.Since(start).Round(time.Millisecond))
	// A second more, a whole bucket's refill, and every bucket is full when
	// the load begins, whatever the forming cost it.
	time.Sleep(time.Second)

	before := make([]gopherpace.Stats, n)
	sentBefore := make([]uint64, n)
	for i, l := range limiters {
		before[i], sentBefore[i] = l.Stats(), transports[i].Stats().DatagramsSent
	}
	offered, admitted, behind := drive(limiters, mult*float64(rate), d)
	var total, asked int64
	for i := range n {
		total, asked = total+admitted[i], asked+offered[i]
	}
	ideal := float64(rate)*d.Seconds() + float64(rate)
	cluster := float64(total) / float64(asked)
	lo, hi := math.Inf(1), math.Inf(-1)
	var datagrams, bytes float64
	for i, l := range limiters {
		r := float64(admitted[i]) / float64(offered[i]) / cluster
		lo, hi = min(lo, r), max(hi, r)
		datagrams += float64(transports[i].Stats().DatagramsSent - sentBefore[i])
		bytes += float64(l.Stats().BytesToPeers - before[i].BytesToPeers) // each datagram's bytes once per peer it went to
	}
	secs := d.Seconds() * float64(n)
	var dropped, malformed, missing uint64
	leastVisible := int64(n)
	for i, l := range limiters {
		ts, st := transports[i].Stats(), l.Stats()
		dropped, malformed, missing = dropped+ts.FramesDropped, malformed+ts.FramesMalformed, missing+st.FramesMissing
		leastVisible = min(leastVisible, st.VisibleNodes)
	}
	fmt.Printf("transport queues dropped %d frames, %d malformed; %d numbered frames missing; the least visible at the end: %d of %d\n",
		dropped, malformed, missing, leastVisible, n)
	fmt.Printf("\n| replicas | total vs R·t+B | each replica's admit ratio vs the cluster's | datagrams/s per replica, to its peers | frame bytes/s per replica, to its peers | load generator behind |\n")
	fmt.Printf("|---|---|---|---|---|---|\n")
	fmt.Printf("| %d | %d of %.0f (%+.2f%%) | %.2f–%.2f | %.0f | %.1f KB | %v |\n", n, total, ideal, 100*(float64(total)-ideal)/ideal,
		lo, hi, datagrams/secs, bytes/secs/1000, behind.Round(time.Millisecond))
	return nil
}

// drive offers total requests a second for d as one Poisson stream, each
// arrival dealt to a replica at random and decided on its own goroutine
// by Allow (which may wait a few milliseconds for its report), and
// returns what each replica was offered and admitted, and how far the
// generator fell behind its schedule at worst.
func drive(limiters []*gopherpace.Limiter, total float64, d time.Duration) (offered, admitted []int64, behind time.Duration) {
	n := len(limiters)
	offered, admitted = make([]int64, n), make([]int64, n)
	counts := make([]atomic.Int64, n)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	var wg sync.WaitGroup
	begin := time.Now()
	for at := time.Duration(0); ; {
		at += time.Duration(rng.ExpFloat64() / total * float64(time.Second))
		if at >= d {
			break
		}
		if wait := at - time.Since(begin); wait > 0 {
			time.Sleep(wait)
		} else {
			behind = max(behind, -wait)
		}
		i := rng.IntN(n)
		offered[i]++
		wg.Go(func() {
			if ok, _ := limiters[i].Allow(); ok {
				counts[i].Add(1)
			}
		})
	}
	wg.Wait()
	for i := range counts {
		admitted[i] = counts[i].Load()
	}
	return offered, admitted, behind
}
