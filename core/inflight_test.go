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

// A simulated cluster of five, with frames 1-3 ms late and 2% lost, every
// node asked at random times (one of them twice as often), each request
// in flight 5-15 ms: the cluster never holds more than Bound, fills the limit, and every node's share of its
// requests let in is within a tenth of the cluster's. A node that leaves
// gives its slots back at once; one that crashes, once the others no
// longer list it.
func TestInFlightAcrossASimulatedCluster(t *testing.T) {
	const limit, nodes = 50, 5
	net := memtransport.New(memtransport.WithRandom(7), memtransport.WithLatency(time.Millisecond, 2*time.Millisecond),
		memtransport.WithLoss(0.02), memtransport.WithFailureDetection(2*time.Second))
	var lims []*gopherpace.InFlight
	var trs []*memtransport.Transport
	for i := range nodes { // the transports join first, as memberpace's do
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
		lims = append(lims, f)
	}
	defer func() {
		for i := range lims {
			lims[i].Close()
			trs[i].Close()
		}
	}()
	bound := lims[0].Bound(nodes)
	rng := rand.New(rand.NewPCG(1, 2))
	type held struct {
		until   time.Time
		release func()
		node    int
	}
	var inFlight []held
	var asked, let [nodes]int
	worst := 0
	for step := range 40_000 { // 20 s of 10,000 asks a second against 50 slots of 10 ms: twice the limit
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
		for range 5 {
			i := rng.IntN(nodes + 1)
			if i == nodes {
				i = 0 // n0 is asked twice as often
			}
			rel, ok := lims[i].TryAcquire("backend")
			if step >= 10_000 {
				asked[i]++
			}
			if ok {
				inFlight = append(inFlight, held{now.Add(time.Duration(5+rng.IntN(11)) * time.Millisecond), rel, i})
				if step >= 10_000 {
					let[i]++
				}
			}
		}
		worst = max(worst, len(inFlight))
		if len(inFlight) > int(bound) {
			t.Fatalf("%d in flight at step %d, over the bound %d", len(inFlight), step, bound)
		}
	}
	var sumAsked, sumLet int
	for i := range nodes {
		sumAsked, sumLet = sumAsked+asked[i], sumLet+let[i]
	}
	cluster := float64(sumLet) / float64(sumAsked)
	for i := range nodes {
		if r := float64(let[i]) / float64(asked[i]); r < 0.9*cluster || r > 1.1*cluster {
			t.Errorf("node %d let in %.3f of its requests, the cluster %.3f (%v of %v)", i, r, cluster, let, asked)
		}
	}
	if worst < limit {
		t.Errorf("the cluster never filled the limit: %d", worst)
	}
	t.Logf("at most %d in flight (limit %d, bound %d); %.3f of the requests let in", worst, limit, bound, cluster)

	// n4 takes slots and leaves; n3 takes slots and crashes.
	for _, h := range inFlight {
		h.release()
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
		name         string
		late, moving bool
		oneLate      bool
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
		defer tr.Close()
		defer f.Close()
		lims = append(lims, f)
	}
	bound := lims[0].Bound(nodes)
	rng := rand.New(rand.NewPCG(3, uint64(nodes)))
	type held struct {
		until   time.Time
		release func()
	}
	var inFlight []held
	asked, let := make([]int, nodes), make([]int, nodes)
	weights := nodes * (nodes + 1) / 2
	worst := 0
	// 6,000 asks a second (three a step of 0.5 ms) against 40 slots
	// of 20 ms; the first 2 s are the warm-up.
	for step := range 24_000 {
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
		for range 3 {
			// Node i is asked in proportion to n−i: n0 the most, n1
			// (the late reader) next.
			w, i := rng.IntN(weights), 0
			for w >= nodes-i {
				w -= nodes - i
				i++
			}
			if moving {
				i = (i + step/400) % nodes
			}
			rel, ok := lims[i].TryAcquire("backend")
			if step >= 4_000 {
				asked[i]++
			}
			if ok {
				inFlight = append(inFlight, held{now.Add(20 * time.Millisecond), rel})
				if step >= 4_000 {
					let[i]++
				}
			}
		}
		worst = max(worst, len(inFlight))
		if len(inFlight) > int(bound) {
			t.Fatalf("%d in flight at step %d, over the bound %d", len(inFlight), step, bound)
		}
	}
	var sumAsked, sumLet int
	for i := range nodes {
		sumAsked, sumLet = sumAsked+asked[i], sumLet+let[i]
	}
	cluster := float64(sumLet) / float64(sumAsked)
	for i := range nodes {
		if moving {
			break // a node's part follows the demand late, by design
		}
		if r := float64(let[i]) / float64(asked[i]); r < 0.9*cluster || r > 1.1*cluster {
			t.Errorf("node %d let in %.3f of its requests, the cluster %.3f (%v of %v)", i, r, cluster, let, asked)
		}
	}
	if worst < limit {
		t.Errorf("the cluster never filled the limit: %d", worst)
	}
	t.Logf("at most %d in flight (limit %d, bound %d); %.3f of the requests let in", worst, limit, bound, cluster)
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
