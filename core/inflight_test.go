package gopherpace_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// Standalone, an in-flight limit is a semaphore per key: the limit is
// held, a release func frees one slot however often it is called, and
// Acquire waits for a slot until its context ends.
func TestInFlightStandalone(t *testing.T) {
	f, err := gopherpace.NewInFlight(2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r1, ok1 := f.TryAcquire("db")
	_, ok2 := f.TryAcquire("db")
	if _, ok3 := f.TryAcquire("db"); !ok1 || !ok2 || ok3 {
		t.Fatalf("three tries at a limit of 2: %v %v %v", ok1, ok2, ok3)
	}
	if _, ok := f.TryAcquire("other"); !ok {
		t.Fatal("another key was refused")
	}
	r1()
	r1() // a second call frees nothing more
	if own, cluster := f.Count("db"); own != 1 || cluster != 1 {
		t.Fatalf("after one release: %d, %d in flight", own, cluster)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r, err := f.Acquire(ctx, "db")
	if err != nil {
		t.Fatalf("a free slot: %v", err)
	}
	if _, err := f.Acquire(ctx, "db"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a full key: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		rel, err := f.Acquire(context.Background(), "db")
		if err == nil {
			rel()
		}
		got <- err
	}()
	r()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting Acquire did not get the slot released")
	}
	if st := f.Stats(); st.Acquired != 5 || st.Refused < 2 {
		t.Fatalf("stats %+v", st)
	}
}

// Options of a rate, and limits out of range, are refused by name.
func TestInFlightRefusesWhatDoesNotApply(t *testing.T) {
	_, err := gopherpace.NewInFlight(0, gopherpace.WithRate(5, time.Second), gopherpace.WithShadowMode())
	for _, want := range []string{"in-flight limit 0", "WithRate(5, 1s)", "WithShadowMode"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %q", err, want)
		}
	}
}

// inFlightCluster joins nodes transports to net first, as memberpace's
// join, then gives each an in-flight limit of limit; the test's cleanup
// closes them.
func inFlightCluster(t *testing.T, net *memtransport.Network, nodes int, limit int64) ([]*gopherpace.InFlight, []*memtransport.Transport) {
	t.Helper()
	var lims []*gopherpace.InFlight
	var trs []*memtransport.Transport
	for i := range nodes {
		tr, err := net.Join(fmt.Sprintf("n%d", i))
		if err != nil {
			t.Fatal(err)
		}
		trs = append(trs, tr)
	}
	for _, tr := range trs {
		f, err := gopherpace.NewInFlight(limit, gopherpace.WithTransport(tr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close(); tr.Close() })
		lims = append(lims, f)
	}
	return lims, trs
}

// slotLoad is a simulated load on an in-flight limit's cluster, in steps
// of 0.5 ms: each step the requests whose time is up give their slots
// back, then perStep more ask, each at the node pick names and holding
// its slot for hold. From step warmup on, each node's asks and admits
// are counted.
type slotLoad struct {
	steps, warmup, perStep int
	pick                   func(step int) int
	hold                   func() time.Duration
}

// run plays the load and returns the most requests held at once, each
// node's asks and admits, and the release funcs of the requests still
// held. It fails t the moment the cluster holds more than its Bound.
func (l slotLoad) run(t *testing.T, net *memtransport.Network, lims []*gopherpace.InFlight) (worst int, asked, let []int, held []func()) {
	t.Helper()
	bound := lims[0].Bound(len(lims))
	type hold struct {
		until   time.Time
		release func()
	}
	var inFlight []hold
	asked, let = make([]int, len(lims)), make([]int, len(lims))
	for step := range l.steps {
		net.Advance(500 * time.Microsecond)
		now := net.Now()
		kept := inFlight[:0]
		for _, h := range inFlight {
			if !h.until.After(now) {
				h.release()
			} else {
				kept = append(kept, h)
			}
		}
		inFlight = kept
		for range l.perStep {
			i := l.pick(step)
			rel, ok := lims[i].TryAcquire("backend")
			if step >= l.warmup {
				asked[i]++
			}
			if ok {
				inFlight = append(inFlight, hold{now.Add(l.hold()), rel})
				if step >= l.warmup {
					let[i]++
				}
			}
		}
		worst = max(worst, len(inFlight))
		if len(inFlight) > int(bound) {
			t.Fatalf("%d in flight at step %d, over the bound %d", len(inFlight), step, bound)
		}
	}
	for _, h := range inFlight {
		held = append(held, h.release)
	}
	return worst, asked, let, held
}

// clusterRatio is the part of its requests the cluster let in; with
// fair, it fails t unless every node let in its own part within a tenth
// of it.
func clusterRatio(t *testing.T, asked, let []int, fair bool) float64 {
	t.Helper()
	var sumAsked, sumLet int
	for i := range asked {
		sumAsked, sumLet = sumAsked+asked[i], sumLet+let[i]
	}
	cluster := float64(sumLet) / float64(sumAsked)
	for i := range asked {
		if r := float64(let[i]) / float64(asked[i]); fair && (r < 0.9*cluster || r > 1.1*cluster) {
			t.Errorf("node %d let in %.3f of its requests, the cluster %.3f (%v of %v)", i, r, cluster, let, asked)
		}
	}
	return cluster
}

// A simulated cluster of five, with frames 1-3 ms late and 2% lost, every
// node asked at random times (one of them twice as often), each request
// in flight 5-15 ms: the cluster never holds more than Bound, fills the
// limit, and every node's share of its requests let in is within a tenth
// of the cluster's. A node that leaves gives its slots back at once; one
// that crashes, once the others no longer list it.
func TestInFlightAcrossASimulatedCluster(t *testing.T) {
	const limit, nodes = 50, 5
	net := memtransport.New(memtransport.WithRandom(7), memtransport.WithLatency(time.Millisecond, 2*time.Millisecond),
		memtransport.WithLoss(0.02), memtransport.WithFailureDetection(2*time.Second))
	lims, trs := inFlightCluster(t, net, nodes, limit)
	rng := rand.New(rand.NewPCG(1, 2))
	// 20 s of 10,000 asks a second against 50 slots of 10 ms: twice the
	// limit.
	worst, asked, let, held := slotLoad{steps: 40_000, warmup: 10_000, perStep: 5,
		pick: func(int) int { return rng.IntN(nodes+1) % nodes }, // n0 is asked twice as often
		hold: func() time.Duration { return time.Duration(5+rng.IntN(11)) * time.Millisecond },
	}.run(t, net, lims)
	cluster := clusterRatio(t, asked, let, true)
	if worst < limit {
		t.Errorf("the cluster never filled the limit: %d", worst)
	}
	t.Logf("at most %d in flight (limit %d, bound %d); %.3f of the requests let in", worst, limit, lims[0].Bound(nodes), cluster)

	// n4 takes slots and leaves; n3 takes slots and crashes.
	for _, release := range held {
		release()
	}
	for i := 3; i < 5; i++ {
		for range 5 {
			lims[i].TryAcquire("backend")
		}
	}
	net.Advance(200 * time.Millisecond)
	if _, cl := lims[0].Count("backend"); cl != 10 {
		t.Fatalf("n0 sees %d in flight, want n3's and n4's 10", cl)
	}
	lims[4].Close()
	net.Advance(50 * time.Millisecond)
	if _, cl := lims[0].Count("backend"); cl != 5 {
		t.Fatalf("after n4 left n0 sees %d, want 5", cl)
	}
	trs[3].Crash()
	net.Advance(time.Second)
	if _, cl := lims[0].Count("backend"); cl != 5 {
		t.Fatalf("a crashed node still listed lost its slots early: %d", cl)
	}
	net.Advance(2 * time.Second)
	if _, cl := lims[0].Count("backend"); cl != 0 {
		t.Fatalf("after failure detection n0 sees %d, want 0", cl)
	}
}

// The real-memberlist scenario, simulated: 3 and 5 nodes share a limit of
// 40, asked three times what it holds (each request 20 ms), weighted
// n : … : 1, at random instants; reports take 1 to 3 ms and 2% are lost.
// Then as busy processes read them: one node, or every node, reads its
// peers' reports 20 to 140 ms late (up to three ticks); and with every
// node late, the demand moves from node to node every 200 ms. The cluster
// never holds more than Bound and fills the limit; with steady demand
// every node lets in its part of its requests within a tenth of the
// cluster's.
func TestInFlightWithLateReports(t *testing.T) {
	for _, c := range []struct {
		name                  string
		late, oneLate, moving bool
	}{{name: "on time"}, {name: "one late reader", late: true, oneLate: true}, {name: "every report late", late: true},
		{name: "every report late, demand moving", late: true, moving: true}} {
		for _, nodes := range []int{3, 5} {
			t.Run(fmt.Sprint(c.name, ", ", nodes, " nodes"), func(t *testing.T) { inFlightWithLateReports(t, nodes, c.late, c.oneLate, c.moving) })
		}
	}
}

func inFlightWithLateReports(t *testing.T, nodes int, late, oneLate, moving bool) {
	const limit = 40
	lag := rand.New(rand.NewPCG(uint64(nodes), 9))
	net := memtransport.New(memtransport.WithRandom(uint64(nodes)), memtransport.WithLatency(time.Millisecond, 2*time.Millisecond),
		memtransport.WithLoss(0.02), memtransport.WithLinkLatency(func(from, to string) time.Duration {
			if !late || oneLate && to != "n1" {
				return 0
			}
			return time.Duration(20+lag.IntN(121)) * time.Millisecond
		}))
	lims, _ := inFlightCluster(t, net, nodes, limit)
	rng := rand.New(rand.NewPCG(3, uint64(nodes)))
	weights := nodes * (nodes + 1) / 2
	// 6,000 asks a second (three a step) against 40 slots of 20 ms; the
	// first 2 s are the warm-up.
	worst, asked, let, _ := slotLoad{steps: 24_000, warmup: 4_000, perStep: 3,
		pick: func(step int) int {
			// Node i is asked in proportion to n−i: n0 the most, n1 (the
			// late reader) next; moving, the weights turn every 200 ms.
			w, i := rng.IntN(weights), 0
			for w >= nodes-i {
				w -= nodes - i
				i++
			}
			if moving {
				i = (i + step/400) % nodes
			}
			return i
		},
		hold: func() time.Duration { return 20 * time.Millisecond },
	}.run(t, net, lims)
	// Moving, a node's part follows the demand late, by design.
	cluster := clusterRatio(t, asked, let, !moving)
	if worst < limit {
		t.Errorf("the cluster never filled the limit: %d", worst)
	}
	t.Logf("at most %d in flight (limit %d, bound %d); %.3f of the requests let in", worst, limit, lims[0].Bound(nodes), cluster)
}

// A node hears a peer that joined after it from the peer's first report,
// not from its own next reading of the member list a tick later.
func TestInFlightHearsANewcomerAtOnce(t *testing.T) {
	net := memtransport.New(memtransport.WithRandom(4))
	var fs []*gopherpace.InFlight
	for _, name := range []string{"a", "b"} {
		tr, err := net.Join(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := gopherpace.NewInFlight(3, gopherpace.WithTransport(tr))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fs = append(fs, f)
	}
	if _, ok := fs[1].TryAcquire("k"); !ok {
		t.Fatal("refused")
	}
	net.Advance(10 * time.Millisecond) // the report, not yet a tick
	if _, cl := fs[0].Count("k"); cl != 1 {
		t.Fatalf("a knows of %d in flight, want b's 1 (a %+v, b %+v)", cl, fs[0].Stats(), fs[1].Stats())
	}
	if st := fs[0].Stats(); st.FramesDropped != 0 || st.Peers != 1 {
		t.Fatalf("stats %+v", st)
	}
}
