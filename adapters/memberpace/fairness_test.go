package memberpace

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/seeds"
)

// The fairness of the cluster over real memberlist: requests arrive at each
// node as a Poisson process of its own, and in every window of sustained
// load from 2 s after an event, each node must admit the same share of what
// it is offered as the cluster does, within 20% (the simulator's bound is
// 10%; real time adds scheduling noise).

const slot = 100 * time.Millisecond

// fairRun records what each node was offered and admitted, per slot.
type fairRun struct {
	offered, admitted [][]atomic.Int64
}

// fairDrive offers node i a Poisson stream at rate(i, t) requests per
// second for d, through whatever limiter lims[i] holds at the time (none:
// the node is down), running each event at its time.
func fairDrive(lims []*atomic.Pointer[gopherpace.Limiter], rate func(i int, at time.Duration) float64, d time.Duration, events map[time.Duration]func()) *fairRun {
	slots := int(d / slot)
	r := &fairRun{offered: make([][]atomic.Int64, len(lims)), admitted: make([][]atomic.Int64, len(lims))}
	for i := range lims {
		r.offered[i], r.admitted[i] = make([]atomic.Int64, slots), make([]atomic.Int64, slots)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range lims {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			next := start
			for {
				at := next.Sub(start)
				if at >= d {
					return
				}
				per := rate(i, at)
				if per <= 0 {
					next = next.Add(10 * time.Millisecond)
					time.Sleep(time.Until(next))
					continue
				}
				next = next.Add(time.Duration(rng.ExpFloat64() / per * float64(time.Second)))
				if wait := time.Until(next); wait > 0 {
					time.Sleep(wait)
				}
				s := min(int(next.Sub(start)/slot), slots-1)
				l := lims[i].Load()
				if l == nil || s < 0 {
					continue
				}
				r.offered[i][s].Add(1)
				if ok, _ := l.Allow(); ok {
					r.admitted[i][s].Add(1)
				}
			}
		})
	}
	for at, do := range events {
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(at)))
			do()
		})
	}
	wg.Wait()
	return r
}

// unfairness is the largest gap between a node's admitted/offered and the
// cluster's over [from, to), among nodes offered at least 5% of the load,
// and what each node was offered and admitted.
func (r *fairRun) unfairness(from, to time.Duration) (worst float64, offered, admitted []int64) {
	offered, admitted = make([]int64, len(r.offered)), make([]int64, len(r.offered))
	var o, a int64
	for i := range r.offered {
		for s := int(from / slot); s < int(to/slot) && s < len(r.offered[i]); s++ {
			offered[i] += r.offered[i][s].Load()
			admitted[i] += r.admitted[i][s].Load()
		}
		o, a = o+offered[i], a+admitted[i]
	}
	if o == 0 || a == 0 {
		return 0, offered, admitted
	}
	cluster := float64(a) / float64(o)
	for i := range offered {
		if offered[i]*20 < o {
			continue
		}
		worst = max(worst, math.Abs(float64(admitted[i])/float64(offered[i])/cluster-1))
	}
	return worst, offered, admitted
}

func (r *fairRun) total() int64 {
	var n int64
	for i := range r.admitted {
		for s := range r.admitted[i] {
			n += r.admitted[i][s].Load()
		}
	}
	return n
}

func pointers(lims []*gopherpace.Limiter) []*atomic.Pointer[gopherpace.Limiter] {
	out := make([]*atomic.Pointer[gopherpace.Limiter], len(lims))
	for i, l := range lims {
		out[i] = &atomic.Pointer[gopherpace.Limiter]{}
		out[i].Store(l)
	}
	return out
}

func TestFairnessOverRealMemberlist(t *testing.T) {
	const rate, burst = 300, 300
	equal := func(int, time.Duration) float64 { return 4 * rate / 3 }
	for _, tc := range []struct {
		name string
		// run drives the scenario and returns the run and the window to
		// judge; total, when set, is the bound on the whole run's admits
		// (R·d + B, ±2%).
		run func(t *testing.T) (r *fairRun, from, to time.Duration, ideal float64)
	}{
		{"uniform", func(t *testing.T) (*fairRun, time.Duration, time.Duration, float64) {
			lims := limiters(t, threeNodes(t), gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(burst))
			return fairDrive(pointers(lims), equal, 8*time.Second, nil), 2 * time.Second, 7 * time.Second, rate*8 + burst
		}},
		// Two zones of two: grouped by zone, so each node sends its mate
		// its running totals as digest entries and relays them to the
		// other zone (core/own_entries.go), over real UDP.
		{"two zones of two, in groups", func(t *testing.T) (*fairRun, time.Duration, time.Duration, float64) {
			a := node(t, "z0", WithZone("zone-a"))
			s := WithSeeds(seeds.Static{a.GossipAddr()})
			nodes := []*Transport{a, node(t, "z1", s, WithZone("zone-a")), node(t, "z2", s, WithZone("zone-b")), node(t, "z3", s, WithZone("zone-b"))}
			eventually(t, 5*time.Second, "4 members and their zones", func() bool {
				for _, n := range nodes {
					if len(n.Members()) != 3 || n.Zone("z3") != "zone-b" || n.Zone("z0") != "zone-a" {
						return false
					}
				}
				return true
			})
			lims := limiters(t, nodes, gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(burst))
			four := func(int, time.Duration) float64 { return rate }
			r := fairDrive(pointers(lims), four, 8*time.Second, nil)
			for i, l := range lims {
				if st := l.Stats(); st.FramesRelayed == 0 || st.VisibleNodes != 4 {
					t.Errorf("node %d relayed %d frames and sees %d of %d nodes; want some, and all 4", i, st.FramesRelayed, st.VisibleNodes, st.KnownNodes)
				}
			}
			return r, 2 * time.Second, 7 * time.Second, rate*8 + burst
		}},
		{"skewed", func(t *testing.T) (*fairRun, time.Duration, time.Duration, float64) {
			lims := limiters(t, threeNodes(t), gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(burst))
			share := []float64{0.8, 0.1, 0.1}
			load := func(i int, _ time.Duration) float64 { return 4 * rate * share[i] }
			return fairDrive(pointers(lims), load, 8*time.Second, nil), 2 * time.Second, 7 * time.Second, rate*8 + burst
		}},
		{"load moves from one node to all", func(t *testing.T) (*fairRun, time.Duration, time.Duration, float64) {
			lims := limiters(t, threeNodes(t), gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(burst))
			load := func(i int, at time.Duration) float64 {
				if at < 3*time.Second {
					return map[bool]float64{true: 4 * rate, false: 0}[i == 0]
				}
				return 4 * rate / 3
			}
			return fairDrive(pointers(lims), load, 10*time.Second, nil), 5 * time.Second, 10 * time.Second, 0
		}},
		{"heal after a 1 s cut", func(t *testing.T) (*fairRun, time.Duration, time.Duration, float64) {
			var bl [3]*blockable
			rejoin := WithRejoinInterval(time.Second)
			a := node(t, "h0", rejoin, withBlockable(t, &bl[0]))
			s := WithSeeds(seeds.Static{a.GossipAddr()})
			b := node(t, "h1", rejoin, s, withBlockable(t, &bl[1]))
			c := node(t, "h2", rejoin, s, withBlockable(t, &bl[2]))
			eventually(t, 5*time.Second, "3 members", func() bool { return len(a.Members()) == 2 && len(c.Members()) == 2 })
			lims := limiters(t, []*Transport{a, b, c}, gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(burst))
			events := map[time.Duration]func(){
				2 * time.Second: func() {
					bl[2].block(a.GossipAddr(), b.GossipAddr())
					bl[0].block(c.GossipAddr())
					bl[1].block(c.GossipAddr())
				},
				3 * time.Second: func() {
					for _, x := range bl {
						x.block()
					}
				},
			}
			return fairDrive(pointers(lims), equal, 10*time.Second, events), 5 * time.Second, 10 * time.Second, 0
		}},
		{"restart under a new name", func(t *testing.T) (*fairRun, time.Duration, time.Duration, float64) {
			var bl [3]*blockable
			a := node(t, "r0", withBlockable(t, &bl[0]))
			s := WithSeeds(seeds.Static{a.GossipAddr()})
			b := node(t, "r1", s, withBlockable(t, &bl[1]))
			c := node(t, "r2", s, withBlockable(t, &bl[2]))
			eventually(t, 5*time.Second, "3 members", func() bool { return len(a.Members()) == 2 && len(c.Members()) == 2 })
			opts := []gopherpace.Option{gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(burst)}
			ptrs := pointers(limiters(t, []*Transport{a, b, c}, opts...))
			events := map[time.Duration]func(){
				// A crash: r2 goes silent to everyone without a goodbye,
				// and a new process takes its place under a name of its
				// own.
				2 * time.Second: func() {
					bl[2].block("*")
					bl[0].block(c.GossipAddr())
					bl[1].block(c.GossipAddr())
					ptrs[2].Store(nil)
				},
				2500 * time.Millisecond: func() {
					again := node(t, "r2-restarted", s)
					ptrs[2].Store(limiters(t, []*Transport{again}, opts...)[0])
				},
			}
			return fairDrive(ptrs, equal, 10*time.Second, events), 5 * time.Second, 10 * time.Second, 0
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, from, to, ideal := tc.run(t)
			worst, offered, admitted := r.unfairness(from, to)
			t.Logf("over %v..%v: offered %v, admitted %v: worst node %.0f%% off the cluster's admit ratio", from, to, offered, admitted, 100*worst)
			if worst > 0.20 {
				t.Errorf("a node's admitted/offered is %.0f%% off the cluster's; bound 20%%", 100*worst)
			}
			if ideal > 0 {
				total := float64(r.total())
				t.Logf("total %.0f, %+.2f%% off R·t+B = %.0f", total, 100*(total-ideal)/ideal, ideal)
				if errPct := 100 * (total - ideal) / ideal; math.Abs(errPct) > 2 {
					t.Errorf("total %.0f is %+.2f%% off R·t+B = %.0f; bound ±2%%", total, errPct, ideal)
				}
			}
		})
	}
}
