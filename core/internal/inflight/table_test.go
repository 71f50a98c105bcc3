package inflight

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

const ms = int64(1_000_000)

// cluster is tables that hear each other's reports through the wire
// format, delivered when the test says.
type cluster struct {
	nodes []*Table
	names []string
	seq   []uint64
}

func newCluster(limit int64, n int) *cluster {
	c := &cluster{seq: make([]uint64, n)}
	for i := range n {
		c.names = append(c.names, fmt.Sprintf("n%d", i))
		c.nodes = append(c.nodes, New(c.names[i], limit, n, 100))
	}
	return c
}

// report is node i's next report, as its peers decode it.
func (c *cluster) report(i int, now int64, all bool) *wire.GaugeFrame {
	gs := c.nodes[i].Report(all, nil)
	c.seq[i]++
	head := wire.GaugeFrame{Limiter: 1, Incarnation: 1, Seq: c.seq[i], Round: c.nodes[i].Round(), KeyHashID: 7}
	b := wire.AppendGaugeHeader(nil, &head, len(gs))
	for _, g := range gs {
		b = wire.AppendGauge(b, g)
	}
	var f wire.GaugeFrame
	if err := wire.DecodeGauges(b, &f); err != nil {
		panic(err)
	}
	return &f
}

func (c *cluster) deliver(i int, f *wire.GaugeFrame) {
	for j, t := range c.nodes {
		if j != i {
			t.Apply(c.names[i], f, true)
		}
	}
}

func (c *cluster) tick(now int64) {
	for i, t := range c.nodes {
		t.Tick(now, c.others(i))
		c.deliver(i, c.report(i, now, true))
	}
}

// others are the members as node i's transport lists them: all but i.
func (c *cluster) others(i int) []string {
	return append(append([]string{}, c.names[:i]...), c.names[i+1:]...)
}

func (c *cluster) total(key uint64) (n int64) {
	for _, t := range c.nodes {
		own, _ := t.Count(key)
		n += own
	}
	return n
}

// Alone, a table is a counting semaphore per key: the limit is held, a
// release frees one slot, releasing more than was taken frees nothing.
func TestStandaloneIsASemaphorePerKey(t *testing.T) {
	tb := NewStandalone(3)
	for range 3 {
		if v := tb.Acquire(5); v != Admitted {
			t.Fatalf("verdict %v below the limit", v)
		}
	}
	if v := tb.Acquire(5); v != Full {
		t.Fatalf("a 4th request of 3: %v", v)
	}
	if v := tb.Acquire(6); v != Admitted {
		t.Fatalf("another key: %v", v)
	}
	tb.Release(5)
	if own, _ := tb.Count(5); own != 2 {
		t.Fatalf("after a release: %d in flight", own)
	}
	for range 5 {
		tb.Release(6)
	}
	if own, _ := tb.Count(6); own != 0 {
		t.Fatalf("released more than taken: %d", own)
	}
	if v := tb.Acquire(5); v != Admitted {
		t.Fatalf("the freed slot: %v", v)
	}
	if v := tb.Acquire(5); v != Full {
		t.Fatalf("past the limit again: %v", v)
	}
}

// Random arrivals and releases at every node, with reports that take up
// to half a tick to arrive, reordered: the cluster never holds more than
// Bound, it comes within 5% of the limit, and every node gets requests
// in.
func TestClusterHoldsTheOvershootBound(t *testing.T) {
	for _, tc := range []struct {
		limit int64
		n     int
	}{{10, 3}, {100, 3}, {100, 5}, {1000, 5}, {3, 5}} {
		t.Run(fmt.Sprintf("limit %d, %d nodes", tc.limit, tc.n), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.limit), uint64(tc.n)))
			c := newCluster(tc.limit, tc.n)
			bound := Bound(tc.limit, tc.n)
			type pending struct {
				at   int64
				from int
				f    *wire.GaugeFrame
			}
			var inTransit []pending
			held := make([]int64, tc.n)
			admitted := make([]int, tc.n)
			var worst int64
			now := int64(0)
			for step := range 60_000 {
				now += int64(rng.ExpFloat64() * float64(ms) / 20)
				if step%2000 == 0 { // a tick every 100 ms
					c.tick(now)
				}
				kept := inTransit[:0]
				for _, p := range inTransit {
					if p.at <= now {
						c.deliver(p.from, p.f)
					} else {
						kept = append(kept, p)
					}
				}
				inTransit = kept
				i := rng.IntN(tc.n)
				if held[i] > 0 && rng.IntN(3) == 0 {
					c.nodes[i].Release(9)
					held[i]--
				} else {
					if c.nodes[i].Acquire(9) == Admitted {
						held[i]++
						admitted[i]++
					}
				}
				if rng.IntN(4) == 0 {
					// Delivered within half a tick, in any order.
					inTransit = append(inTransit, pending{now + rng.Int64N(50*ms), i, c.report(i, now, false)})
				}
				worst = max(worst, c.total(9))
			}
			t.Logf("the cluster held %d at most; bound %d", worst, bound)
			if worst > bound {
				t.Fatalf("the cluster held %d, over the bound %d", worst, bound)
			}
			if worst < tc.limit*95/100 {
				t.Fatalf("the cluster never came near the limit: %d of %d", worst, tc.limit)
			}
			for i, a := range admitted {
				if a == 0 {
					t.Fatalf("node %d let nothing in: %v", i, admitted)
				}
			}
		})
	}
}

// Under overload the limit is shared in proportion to the requests each
// node is asked for: with one node asked three times as often as the
// other, each lets in the same part of what it is asked.
func TestSharesFollowDemand(t *testing.T) {
	c := newCluster(40, 2)
	asks := []int{3, 1}  // requests a millisecond at each node
	const hold = 20 * ms // each request's time in flight: twice the limit asked
	type done struct {
		at   int64
		node int
	}
	var releases []done
	var asked, let [2]int
	for step := range int64(4000) {
		now := step * ms
		if step%50 == 0 {
			c.tick(now)
		}
		kept := releases[:0]
		for _, r := range releases {
			if r.at <= now {
				c.nodes[r.node].Release(1)
			} else {
				kept = append(kept, r)
			}
		}
		releases = kept
		for i, n := range asks {
			for range n {
				v := c.nodes[i].Acquire(1)
				if step >= 2000 {
					asked[i]++
				}
				if v == Admitted {
					releases = append(releases, done{now + hold, i})
					if step >= 2000 {
						let[i]++
					}
				}
			}
		}
		for i := range c.nodes {
			c.deliver(i, c.report(i, now, false))
		}
		if total := c.total(1); total > Bound(40, 2) {
			t.Fatalf("%d in flight at %d ms", total, step)
		}
	}
	r0, r1 := float64(let[0])/float64(asked[0]), float64(let[1])/float64(asked[1])
	cluster := float64(let[0]+let[1]) / float64(asked[0]+asked[1])
	if r0 < 0.9*cluster || r0 > 1.1*cluster || r1 < 0.9*cluster || r1 > 1.1*cluster {
		t.Fatalf("admit ratios %.3f and %.3f against the cluster's %.3f (let in %v of %v)", r0, r1, cluster, let, asked)
	}
	if cluster < 0.45 {
		t.Fatalf("the cluster let in %.3f of twice its limit: slots went unused", cluster)
	}
}

// A peer's slots are given back when it says goodbye, when it is no
// longer a member, and key by key when it stops reporting a key for two
// whole rounds; a report older than what is known changes nothing.
func TestPeersSlotsComeBack(t *testing.T) {
	c := newCluster(10, 2)
	c.nodes[1].Acquire(4)
	// Five rounds: n1 was asked four rounds ago, and has heard n0 since,
	// so it fills its share at once.
	for r := range int64(5) {
		c.tick((10 + 50*r) * ms)
	}
	for range 5 {
		if v := c.nodes[1].Acquire(4); v != Admitted {
			t.Fatalf("within the share: %v", v)
		}
	}
	late := c.report(1, 211*ms, false)
	c.nodes[1].Release(4)
	fresh := c.report(1, 211*ms, false)
	c.deliver(1, fresh)
	c.deliver(1, late) // reordered: older than fresh
	if _, cl := c.nodes[0].Count(4); cl != 5 {
		t.Fatalf("after a reordered report the cluster holds %d, want 5", cl)
	}
	c.nodes[0].Tick(250*ms, c.others(0))
	if _, cl := c.nodes[0].Count(4); cl != 5 {
		t.Fatalf("a member's slots went on a tick: %d", cl)
	}
	c.nodes[0].Tick(300*ms, nil)
	if _, cl := c.nodes[0].Count(4); cl != 0 {
		t.Fatalf("a peer no longer a member still holds %d", cl)
	}
	c.deliver(1, c.report(1, 400*ms, true))
	if _, cl := c.nodes[0].Count(4); cl != 5 {
		t.Fatalf("back: %d", cl)
	}
	beforeBye := c.report(1, 400*ms, true)
	c.deliver(1, &wire.GaugeFrame{Leaving: true, Incarnation: 1, Seq: 99})
	if _, cl := c.nodes[0].Count(4); cl != 0 || c.nodes[0].Counts().Peers != 0 {
		t.Fatalf("after goodbye: %d in flight, %d peers", cl, c.nodes[0].Counts().Peers)
	}
	c.deliver(1, beforeBye) // sent before the goodbye, arriving after it
	if _, cl := c.nodes[0].Count(4); cl != 0 {
		t.Fatalf("a report reordered after the goodbye brought back %d", cl)
	}
	c.nodes[0].Tick(450*ms, nil) // n1 no longer listed: forgotten
	c.nodes[0].Tick(460*ms, c.others(0))
	c.nodes[1] = New("n1", 10, 2, 100) // it comes back under its name
	c.nodes[1].Acquire(4)
	f := c.report(1, 470*ms, true)
	f.Incarnation = 1 // a restart with a clock that has not moved on
	c.deliver(1, f)
	if _, cl := c.nodes[0].Count(4); cl != 1 {
		t.Fatalf("a node that left and came back counts %d", cl)
	}
	// Key by key: n1 reports key 4 in round r, then rounds without it.
	c.deliver(1, c.report(1, 500*ms, true))
	for range 5 {
		c.nodes[1].Release(4)
	}
	c.nodes[1].changedOff(4) // as if the report of the release were lost
	for range 3 {
		c.nodes[1].Tick(600*ms, c.others(1))
		c.deliver(1, c.report(1, 600*ms, true))
	}
	if _, cl := c.nodes[0].Count(4); cl != 0 {
		t.Fatalf("a key left out of whole rounds still holds %d", cl)
	}
}

func (t *Table) changedOff(key uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.slots[key].changed = false
}

// A peer's restart (a new incarnation) replaces what its old run held.
func TestRestartReplacesTheOldRun(t *testing.T) {
	a := New("a", 10, 2, 100)
	a.Apply("b", &wire.GaugeFrame{Incarnation: 1, Seq: 5, Gauges: []wire.Gauge{{Key: 2, InFlight: 7, Demand: 1}}}, true)
	a.Apply("b", &wire.GaugeFrame{Incarnation: 2, Seq: 1, Gauges: []wire.Gauge{{Key: 3, InFlight: 1, Demand: 1}}}, true)
	a.Apply("b", &wire.GaugeFrame{Incarnation: 1, Seq: 6, Gauges: []wire.Gauge{{Key: 2, InFlight: 9, Demand: 1}}}, true)
	if _, cl := a.Count(2); cl != 0 {
		t.Fatalf("the old run's key still counts %d", cl)
	}
	if _, cl := a.Count(3); cl != 1 {
		t.Fatalf("the new run's key counts %d", cl)
	}
	// Keys hashed under another secret are skipped, the keyless one kept.
	a.Apply("c", &wire.GaugeFrame{Incarnation: 1, Seq: 1, Gauges: []wire.Gauge{{Key: 0, InFlight: 4}, {Key: 3, InFlight: 4}}}, false)
	if _, cl := a.Count(3); cl != 1 {
		t.Fatalf("a key of another secret counted: %d", cl)
	}
	if _, cl := a.Count(0); cl != 4 {
		t.Fatalf("the keyless count: %d", cl)
	}
}

// A peer that reports more keys than are kept of each peer has the rest
// dropped and counted: no memory beyond the bound.
func TestPeerKeysAreBounded(t *testing.T) {
	a := New("a", 10, 2, 3)
	f := &wire.GaugeFrame{Incarnation: 1, Seq: 1}
	for k := range uint64(10) {
		f.Gauges = append(f.Gauges, wire.Gauge{Key: k + 1, InFlight: 1})
	}
	a.Apply("b", f, true)
	if a.Counts().DroppedEntries != 7 || len(a.slots) != 3 {
		t.Fatalf("dropped %d, kept %d slots", a.Counts().DroppedEntries, len(a.slots))
	}
}

// A peer the transport stops listing keeps its slots while it still
// reports (the failure detector wrongly declared a busy node dead), and
// loses them after two silent rounds (it crashed).
func TestAnUnlistedPeerThatReportsKeepsItsSlots(t *testing.T) {
	c := newCluster(10, 2)
	c.nodes[1].Acquire(3)
	c.tick(10 * ms)
	for r := range int64(4) {
		c.nodes[0].Tick((20+r*50)*ms, nil) // n1 unlisted
		c.deliver(1, c.report(1, (20+r*50)*ms, true))
		if _, cl := c.nodes[0].Count(3); cl != 1 {
			t.Fatalf("round %d: an unlisted peer that reports counts %d", r, cl)
		}
	}
	c.nodes[0].Tick(300*ms, nil)
	if _, cl := c.nodes[0].Count(3); cl != 1 {
		t.Fatalf("one silent round dropped %d", 1-cl)
	}
	c.nodes[0].Tick(350*ms, nil)
	if _, cl := c.nodes[0].Count(3); cl != 0 || c.nodes[0].Knows("n1") {
		t.Fatalf("after two silent rounds unlisted: %d", cl)
	}
}
