// Command cluster runs three gopherpace replicas in one process, gossiping
// over real memberlist on loopback, and drives them at five times their
// shared limit: first skewed (most traffic on one replica), then uniform.
// Each second it prints what every replica admitted and the cluster total
// against the limit, then a summary. It ends on its own in about 20 s.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/status"
	"github.com/pedreviljoen/gopherpace/examples/internal/loopback"
)

type phase struct {
	name  string
	share []float64 // of the offered load, per replica
}

func main() {
	rate := flag.Int64("rate", 200, "cluster-wide limit, requests per second")
	mult := flag.Float64("load", 5, "offered load as a multiple of the limit")
	seconds := flag.Int("seconds", 8, "seconds per phase")
	statusAddr := flag.String("status", "127.0.0.1:0", "where to serve replica-a's status page")
	flag.Parse()
	if err := run(*rate, *mult, *seconds, *statusAddr); err != nil {
		log.Fatal(err)
	}
}

func run(rate int64, mult float64, seconds int, statusAddr string) error {
	if rate < 1 || rate > 10_000 || mult <= 0 || mult > 20 || seconds < 1 || seconds > 20 {
		return errors.New("rate must be 1..10000, load 0..20, seconds 1..20")
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	names := []string{"replica-a", "replica-b", "replica-c"}
	c, err := loopback.Start(names, rate, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	transports, limiters := c.Transports, c.Limiters
	ln, err := net.Listen("tcp", statusAddr)
	if err != nil {
		return err
	}
	page := &http.Server{Handler: status.NewPage("make demo", limiters[0]), ReadHeaderTimeout: 5 * time.Second}
	go page.Serve(ln)
	defer page.Close()
	fmt.Printf("live status page of %s: http://%s/ (open it while the demo runs)\n", names[0], ln.Addr())
	fmt.Printf("3 replicas on loopback, gossiping over memberlist (%s, %s, %s)\n",
		transports[0].GossipAddr(), transports[1].GossipAddr(), transports[2].GossipAddr())
	fmt.Printf("cluster-wide limit %d req/s, bucket %d; offered %.0f req/s\n\n", rate, rate, mult*float64(rate))

	phases := []phase{
		{"skewed", []float64{0.8, 0.1, 0.1}},
		{"uniform", []float64{1. / 3, 1. / 3, 1. / 3}},
	}
	fmt.Printf("%4s %-8s %10s %10s %10s %8s %7s\n", "sec", "load", names[0], names[1], names[2], "total", "limit")
	var summary []string
	var grand int64
	sec := 0
	for pi, ph := range phases {
		offered, admitted := drive(limiters, mult*float64(rate), ph.share, time.Duration(seconds)*time.Second, func(per []int64) {
			sec++
			total := per[0] + per[1] + per[2]
			limit := rate
			if sec == 1 {
				limit += rate // the bucket starts full
			}
			fmt.Printf("%4d %-8s %10d %10d %10d %8d %7d\n", sec, ph.name, per[0], per[1], per[2], total, limit)
		})
		total := admitted[0] + admitted[1] + admitted[2]
		grand += total
		ideal := rate * int64(seconds)
		if pi == 0 {
			ideal += rate
		}
		summary = append(summary, fmt.Sprintf("%-8s admitted %6d of %6d offered; the limit allows %6d (%+.1f%%)",
			ph.name, total, offered[0]+offered[1]+offered[2], ideal, 100*float64(total-ideal)/float64(ideal)),
			"         "+fairness(offered, admitted))
	}
	ideal := rate*int64(len(phases)*seconds) + rate
	fmt.Println()
	for _, s := range summary {
		fmt.Println(s)
	}
	fmt.Printf("overall  admitted %6d; an ideal single bucket admits %d (%+.1f%%). Three independent per-replica\n",
		grand, ideal, 100*float64(grand-ideal)/float64(ideal))
	fmt.Printf("         limiters of %d/s would have admitted up to %d.\n", rate, 3*ideal)
	for i, l := range limiters {
		st := l.Stats()
		fmt.Printf("gossip   %s: sent %d frames (%d bytes) reporting %d tokens; charged %d tokens from peers\n",
			names[i], st.FramesSent, st.BytesSent, st.TokensReported, st.TokensCharged)
	}
	return nil
}

// fairness says, per replica, what it was offered and admitted and what
// share of its offered load it admitted, against the cluster's: a fair
// cluster admits every client's request with the same chance, whichever
// replica it reaches.
func fairness(offered, admitted []int64) string {
	var o, a int64
	for i := range offered {
		o, a = o+offered[i], a+admitted[i]
	}
	cluster := float64(a) / float64(max(o, 1))
	out, worst := "per replica admitted/offered:", 0.0
	for i := range offered {
		ratio := float64(admitted[i]) / float64(max(offered[i], 1))
		out += fmt.Sprintf(" %d/%d (%.0f%%)", admitted[i], offered[i], 100*ratio)
		if cluster > 0 {
			worst = max(worst, math.Abs(ratio/cluster-1))
		}
	}
	return out + fmt.Sprintf("; cluster %.0f%%, worst replica %.0f%% off it", 100*cluster, 100*worst)
}

// drive offers load for d and calls each with one second's admits per
// replica; it returns what each replica was offered and admitted over the
// whole of d. Requests arrive at random (Poisson) times, independently on
// each replica, as real traffic does: lockstep arrivals would hand every
// fresh token to whichever replica's loop happens to run first.
func drive(lims []*gopherpace.Limiter, offered float64, share []float64, d time.Duration, each func([]int64)) (offers, admits []int64) {
	counters := make([]atomic.Int64, len(lims))
	offerCounts := make([]atomic.Int64, len(lims))
	admits = make([]int64, len(lims))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, l := range lims {
		wg.Go(func() {
			perSec := offered * share[i]
			next := time.Now()
			for {
				next = next.Add(time.Duration(rand.ExpFloat64() / perSec * float64(time.Second)))
				if wait := time.Until(next); wait > 0 {
					select {
					case <-stop:
						return
					case <-time.After(wait):
					}
				}
				select {
				case <-stop:
					return
				default:
				}
				offerCounts[i].Add(1)
				if ok, _ := l.Allow(); ok {
					counters[i].Add(1)
				}
			}
		})
	}
	second := time.NewTicker(time.Second)
	for range int(d / time.Second) {
		<-second.C
		per := make([]int64, len(lims))
		for i := range counters {
			per[i] = counters[i].Swap(0)
			admits[i] += per[i]
		}
		each(per)
	}
	second.Stop()
	close(stop)
	wg.Wait()
	offers = make([]int64, len(lims))
	for i := range offerCounts {
		offers[i] = offerCounts[i].Load()
		admits[i] += counters[i].Swap(0)
	}
	return offers, admits
}
