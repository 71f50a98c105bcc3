package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/pedreviljoen/gopherpace/examples/internal/fleet"
)

// The load runs for loadFor; a fault starts at faultAt and lasts faultFor
// (a freeze, freezeFor).
const (
	loadFor   = 24 * time.Second
	faultAt   = 5 * time.Second
	faultFor  = 8 * time.Second
	freezeFor = 5 * time.Second
	sampleDt  = 250 * time.Millisecond
)

// fault is one fault the harness plays between the replicas.
type fault struct {
	name, what string
	lasts      time.Duration
	nft        bool // made with nftables rules
	// heals: the fault cuts replicas apart and its end brings them back,
	// so the time to the whole cluster again is worth reporting.
	heals bool
	// play makes the fault at its start and keeps it (or flaps it) until
	// ctx ends; the harness heals every fault after (heal).
	play func(ctx context.Context, ns namespaces, f *fleet.Fleet) error
}

func faults() []fault {
	hold := func(make func(ns namespaces, f *fleet.Fleet) error) func(context.Context, namespaces, *fleet.Fleet) error {
		return func(ctx context.Context, ns namespaces, f *fleet.Fleet) error {
			if err := make(ns, f); err != nil {
				return err
			}
			<-ctx.Done()
			return nil
		}
	}
	others := func(of ...int) []int {
		var rest []int
		for i := range replicas {
			if !slices.Contains(of, i) {
				rest = append(rest, i)
			}
		}
		return rest
	}
	// isolate drops, on each replica of side, every packet to and from
	// the replicas of the other side: their gossip, while HAProxy still
	// reaches every replica.
	isolate := func(ns namespaces, side []int) error {
		for _, i := range side {
			set := addrs(others(side...))
			if err := ns.drop(i, []string{"ip saddr " + set}, []string{"ip daddr " + set}); err != nil {
				return err
			}
		}
		return nil
	}
	lose := func(permille int) func(ns namespaces, f *fleet.Fleet) error {
		return func(ns namespaces, f *fleet.Fleet) error {
			r := "meta l4proto { tcp, udp } numgen random mod 1000 < " + strconv.Itoa(permille)
			return ns.drop(0, []string{r}, []string{r})
		}
	}
	return []fault{
		{name: "steady", what: "no fault: the baseline", lasts: faultFor,
			play: func(ctx context.Context, _ namespaces, _ *fleet.Fleet) error { <-ctx.Done(); return nil }},
		{name: "isolate", heals: true, nft: true, what: "replica 0's gossip cut from the others for 8 s; HAProxy still reaches it", lasts: faultFor,
			play: hold(func(ns namespaces, _ *fleet.Fleet) error { return isolate(ns, []int{0}) })},
		{name: "cut", heals: true, what: "replica 0's link down for 8 s: cut from the others and from HAProxy", lasts: faultFor,
			play: hold(func(ns namespaces, _ *fleet.Fleet) error { return ns.link(0, false) })},
		{name: "split", heals: true, nft: true, what: "the cluster split 3/2 for 8 s (gossip; HAProxy reaches all)", lasts: faultFor,
			play: hold(func(ns namespaces, _ *fleet.Fleet) error {
				return errors.Join(isolate(ns, []int{0, 1, 2}), isolate(ns, []int{3, 4}))
			})},
		{name: "one-way", heals: true, nft: true, what: "replica 1 does not hear replica 0 for 8 s (replica 0 hears replica 1)", lasts: faultFor,
			play: hold(func(ns namespaces, _ *fleet.Fleet) error {
				return ns.drop(1, []string{"ip saddr " + replicaIP(0)}, nil)
			})},
		{name: "flap", heals: true, what: "replica 0's link down 1 s of every 2, for 8 s", lasts: faultFor,
			play: func(ctx context.Context, ns namespaces, _ *fleet.Fleet) error {
				tick := time.NewTicker(time.Second)
				defer tick.Stop()
				up := true
				for {
					up = !up
					if err := ns.link(0, up); err != nil {
						return err
					}
					select {
					case <-ctx.Done():
						return nil
					case <-tick.C:
					}
				}
			}},
		{name: "loss5", heals: true, nft: true, what: "5% of replica 0's packets lost, both ways, for 8 s", lasts: faultFor,
			play: hold(lose(50))},
		{name: "loss20", heals: true, nft: true, what: "20% of replica 0's packets lost, both ways, for 8 s", lasts: faultFor,
			play: hold(lose(200))},
		{name: "freeze", heals: true, what: "replica 0 frozen (SIGSTOP) for 5 s, then resumed", lasts: freezeFor,
			play: hold(func(_ namespaces, f *fleet.Fleet) error { return f.Signal(0, syscall.SIGSTOP) })},
		{name: "crash2", what: "replicas 3 and 4 SIGKILLed at once, not replaced", lasts: faultFor,
			play: hold(func(_ namespaces, f *fleet.Fleet) error {
				return errors.Join(f.Signal(3, syscall.SIGKILL), f.Signal(4, syscall.SIGKILL))
			})},
		{name: "garbage", what: "random datagrams and TCP bytes at every replica's gossip port, 8 s", lasts: faultFor,
			play: spray},
	}
}

// spray sends garbage to every replica's gossip port until ctx ends: 200
// random datagrams a second to each, and a TCP connection a second to each
// that writes 4 KiB of random bytes.
func spray(ctx context.Context, _ namespaces, _ *fleet.Fleet) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	buf := make([]byte, 4096)
	var conns []net.Conn
	for i := range replicas {
		c, err := net.Dial("udp", replicaIP(i)+":"+gossipPort)
		if err != nil {
			return err
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for i, c := range conns {
			rand.Read(buf[:1+n%1400])
			c.Write(buf[:1+n%1400]) // a refused datagram is no failure of the fault
			if n%200 == i {
				if tc, err := net.DialTimeout("tcp", replicaIP(i)+":"+gossipPort, time.Second); err == nil {
					rand.Read(buf)
					tc.SetDeadline(time.Now().Add(time.Second))
					tc.Write(buf)
					tc.Close()
				}
			}
		}
	}
}

// heal ends every fault: the rules go, the links come up, a frozen replica
// resumes.
func heal(ns namespaces, f *fleet.Fleet) error {
	err := ns.clear()
	f.Signal(0, syscall.SIGCONT)
	return err
}

// outcome is one run of one fault.
type outcome struct {
	fleet.Result
	// recovered is how long after the heal every replica heard and knew
	// the whole cluster again; -1 if they never did before the load ended.
	recovered time.Duration
	// views is each replica's lowest visible/known during the fault (and
	// until the recovery), "—" where it did not answer.
	views []string
}

func measureAll(ns namespaces, bin string, chosen []fault, runs int, rate int64, load float64) error {
	fmt.Printf("%d replicas of examples/server, each in a network namespace of its own behind a bridge; HAProxy and the load in another.\n", replicas)
	fmt.Printf("R = B = %d/s, offered %.0f×R as Poisson arrivals for %v; the fault starts %v in.\n\n", rate, load, loadFor, faultAt)
	fmt.Println("| fault | run | total vs R·t+B | replicas' admit ratio vs the cluster's | failed requests | every replica whole again after the heal | lowest visible/known per replica during the fault |")
	fmt.Println("|---|---|---|---|---|---|---|")
	failed := false
	_, noNFT := exec.LookPath("nft")
	for _, flt := range chosen {
		if flt.nft && noNFT != nil {
			fmt.Printf("| %s | — | skipped: nft is not installed (`make faults` installs nftables from the OS packages) | | | | |\n", flt.name)
			continue
		}
		for r := 1; r <= runs; r++ {
			out, err := measure(ns, bin, flt, rate, load)
			if err != nil {
				fmt.Printf("| %s | %d | error: %v | | | | |\n", flt.name, r, err)
				failed = true
				continue
			}
			rec := "never (before the load ended)"
			if out.recovered >= 0 {
				rec = out.recovered.Round(10 * time.Millisecond).String()
			}
			if !flt.heals {
				rec = "—"
			}
			fmt.Printf("| %s | %d | %.4f | %s | %d | %s | %s |\n", flt.name, r, out.Total, out.Spread(), out.Failed, rec, join(out.views))
		}
	}
	if failed {
		return errors.New("some runs failed")
	}
	return nil
}

func measure(ns namespaces, bin string, flt fault, rate int64, load float64) (outcome, error) {
	dir, err := os.MkdirTemp("", "gopherpace-faults-run")
	if err != nil {
		return outcome{}, err
	}
	defer os.RemoveAll(dir)
	key := secretKey()
	f, err := fleet.Start(dir, frontIP+":"+frontPort, func(name string, slot int) *exec.Cmd {
		ip := replicaIP(slot)
		cmd := exec.Command("ip", "netns", "exec", ns.replica[slot], bin)
		cmd.Env = append(os.Environ(),
			"GOPHERPACE_RATE="+strconv.FormatInt(rate, 10), "GOPHERPACE_BURST="+strconv.FormatInt(rate, 10),
			"GOPHERPACE_GOSSIP_PORT="+gossipPort, "GOPHERPACE_BIND_ADDR="+ip,
			"GOPHERPACE_HTTP_ADDR="+ip+":"+httpPort,
			"GOPHERPACE_SECRET_KEY="+key,
			"GOPHERPACE_DRAIN=1s")
		return cmd
	})
	if err != nil {
		return outcome{}, err
	}
	defer f.Close()
	defer heal(ns, f)
	for range replicas {
		if err := f.Add(); err != nil {
			return outcome{}, err
		}
	}
	if err := f.WaitFormed(replicas, 20*time.Second); err != nil {
		return outcome{}, err
	}
	url := "http://" + frontIP + ":" + frontPort
	if err := fleet.WaitFor(10*time.Second, func() bool { return fleet.Get(url+"/readyz") == http.StatusOK }); err != nil {
		return outcome{}, errors.New("HAProxy never saw a replica up")
	}
	time.Sleep(time.Second) // every check has passed at least once

	ctx, cancel := context.WithTimeout(context.Background(), loadFor)
	defer cancel()
	live := f.Live()
	smp := newSampler(live)
	start := time.Now()
	faultErr := make(chan error, 1)
	go func() {
		select {
		case <-time.After(faultAt):
		case <-ctx.Done():
			faultErr <- nil
			return
		}
		smp.faultStarted()
		fctx, fcancel := context.WithTimeout(ctx, flt.lasts)
		err := flt.play(fctx, ns, f)
		fcancel()
		err = errors.Join(err, heal(ns, f))
		smp.healed(time.Now())
		faultErr <- err
	}()
	go smp.run(ctx)
	counts := fleet.Generate(ctx, url+"/work", float64(rate)*load)
	elapsed := time.Since(start)
	if err := <-faultErr; err != nil {
		return outcome{}, err
	}
	res := counts.Result(float64(rate)*elapsed.Seconds() + float64(rate))
	return outcome{Result: res, recovered: smp.recovery(), views: smp.lowest()}, nil
}

// sampler reads every replica's /stats every sampleDt, keeping each one's
// lowest view of the cluster from the fault's start until every replica
// sees the whole cluster again after the heal.
type sampler struct {
	live []*fleet.Replica

	mu        sync.Mutex
	watching  bool
	healedAt  time.Time
	wholeAt   time.Time // first sample after the heal with every view whole
	lowVis    []int64
	lowKnown  []int64
	answered  []bool
	unanswers []int
}

func newSampler(live []*fleet.Replica) *sampler {
	s := &sampler{live: live, lowVis: make([]int64, len(live)), lowKnown: make([]int64, len(live)),
		answered: make([]bool, len(live)), unanswers: make([]int, len(live))}
	for i := range live {
		s.lowVis[i], s.lowKnown[i] = replicas, replicas
	}
	return s
}

// faultStarted starts the watch: from now each replica's lowest view counts.
func (s *sampler) faultStarted() {
	s.mu.Lock()
	s.watching = true
	s.mu.Unlock()
}

func (s *sampler) healed(at time.Time) {
	s.mu.Lock()
	s.healedAt = at
	s.mu.Unlock()
}

func (s *sampler) run(ctx context.Context) {
	tick := time.NewTicker(sampleDt)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		stats := make([]fleet.Stats, len(s.live))
		var wg sync.WaitGroup
		for i, r := range s.live {
			wg.Go(func() { stats[i] = fleet.StatsOf(r.HTTP) })
		}
		wg.Wait()
		now := time.Now()
		s.mu.Lock()
		if s.watching && s.wholeAt.IsZero() {
			whole := true
			for i, st := range stats {
				if !st.Answered {
					s.unanswers[i]++
					whole = false
					continue
				}
				s.answered[i] = true
				s.lowVis[i] = min(s.lowVis[i], st.VisibleNodes)
				s.lowKnown[i] = min(s.lowKnown[i], st.KnownNodes)
				if st.VisibleNodes != replicas || st.KnownNodes != replicas {
					whole = false
				}
			}
			if whole && !s.healedAt.IsZero() {
				s.wholeAt = now
			}
		}
		s.mu.Unlock()
	}
}

// recovery is how long after the heal every replica was whole again, or -1.
func (s *sampler) recovery() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wholeAt.IsZero() || s.healedAt.IsZero() {
		return -1
	}
	return s.wholeAt.Sub(s.healedAt)
}

// lowest is each replica's lowest "visible/known", with "(silent n)" when
// some samples went unanswered.
func (s *sampler) lowest() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i := range s.live {
		v := strconv.FormatInt(s.lowVis[i], 10) + "/" + strconv.FormatInt(s.lowKnown[i], 10)
		if !s.answered[i] {
			v = "—"
		}
		if s.unanswers[i] > 0 {
			v += fmt.Sprintf(" (%d samples unanswered)", s.unanswers[i])
		}
		out = append(out, v)
	}
	return out
}
