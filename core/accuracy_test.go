package gopherpace_test

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// Scenarios of the accuracy harness: N=5, R=1000/s, B=1000, 1 ms delivery,
// 100 ms gossip interval, 20 s, offered load 10×R unless stated.
func accuracyScenarios() []scenario {
	return []scenario{
		{name: "uniform"},
		{name: "skew", load: onNode(10, 0)},
		// The busiest node is the one whose CPU is busiest: its requests
		// reach the limiter in clumps, as a starved process takes them.
		{name: "skew 80/5/5/5/5, busy node starved", load: eightyOnNode0, starved: []int{0}},
		{name: "shift", load: func(t time.Duration, i int) float64 {
			if int(t/(2*time.Second))%5 == i {
				return 10
			}
			return 0
		}, fairFrom: []time.Duration{}}, // one node is offered load at a time
		{name: "flash", flash: true},
		{name: "loss10", netOpts: []memtransport.Option{memtransport.WithLoss(0.10)}},
		{name: "loss10+dup+reorder", netOpts: []memtransport.Option{
			memtransport.WithLoss(0.10), memtransport.WithDuplication(0.10),
			memtransport.WithLatency(time.Millisecond, 4*time.Millisecond)}},
		{name: "join", nodes: 4, events: []simEvent{{10 * time.Second, func(c *simCluster) {
			c.start(c.addNode("node-4"))
		}}}, fairFrom: []time.Duration{2 * time.Second, 12 * time.Second}},
		{name: "restart", events: []simEvent{
			{8 * time.Second, func(c *simCluster) { c.crash(2) }},
			{10 * time.Second, func(c *simCluster) { c.start(c.nodes[2]) }},
		}, fairFrom: []time.Duration{2 * time.Second, 12 * time.Second}},
		{name: "leave", events: []simEvent{{10 * time.Second, func(c *simCluster) { c.leave(4) }}},
			fairFrom: []time.Duration{2 * time.Second, 12 * time.Second}},
		// memberlist's failure detection (memberpace's default profile)
		// declares the crashed node dead 2 s after the crash.
		{name: "crash", events: []simEvent{{5 * time.Second, func(c *simCluster) { c.crash(4) }}},
			netOpts: []memtransport.Option{memtransport.WithFailureDetection(2 * time.Second)}, fairFrom: []time.Duration{7 * time.Second}},
		// A process crash: its port refuses connections, and its peers know
		// it gone within a tick of its silence.
		{name: "crash, its port refusing", events: []simEvent{{5 * time.Second, func(c *simCluster) { c.crashProcess(4) }}},
			netOpts: []memtransport.Option{memtransport.WithFailureDetection(2 * time.Second)}, fairFrom: []time.Duration{7 * time.Second}},
		// A partition longer than failure detection: each side's memberlist
		// declares the other dead; the majority takes the rate back, the
		// minority keeps its share (share) or yields (fail-closed).
		{name: "partition 3/2, 8 s", events: partition32For8s,
			netOpts:  []memtransport.Option{memtransport.WithFailureDetection(2 * time.Second)},
			fairFrom: []time.Duration{15 * time.Second}},
		{name: "partition 3/2, 8 s (fail-closed)", events: partition32For8s,
			netOpts:  []memtransport.Option{memtransport.WithFailureDetection(2 * time.Second)},
			limOpts:  []gopherpace.Option{gopherpace.WithPartitionPolicy(gopherpace.PartitionFailClosed)},
			fairFrom: []time.Duration{15 * time.Second}},
		{name: "partition 3/2", events: []simEvent{
			{5 * time.Second, func(c *simCluster) { c.net.Partition(c.names(0, 1, 2), c.names(3, 4)) }},
			{10 * time.Second, func(c *simCluster) { c.net.Heal() }},
		}, fairFrom: afterHeal},
		// Daily transitions. A rolling deploy replaces every replica under
		// a new name, one every 3 s; a restart keeps the name (StatefulSet).
		{name: "rolling deploy", events: rolling(false), fairFrom: []time.Duration{2 * time.Second, 7 * time.Second, 12 * time.Second}},
		{name: "rolling restart, same names", events: rolling(true), fairFrom: []time.Duration{2 * time.Second, 7 * time.Second, 12 * time.Second}},
		{name: "scale-out 3 → 5", nodes: 3, events: []simEvent{{10 * time.Second, func(c *simCluster) {
			c.start(c.addNode("node-5"))
			c.start(c.addNode("node-6"))
		}}}, fairFrom: []time.Duration{2 * time.Second, 12 * time.Second}},
		// Two replicas leave at once; one goodbye is lost on the way.
		{name: "scale-in 5 → 3", events: []simEvent{{10 * time.Second, func(c *simCluster) {
			c.net.Isolate(c.nodes[4].name)
			c.leave(3)
			c.leave(4)
		}}}, fairFrom: []time.Duration{2 * time.Second, 11 * time.Second}},
		{name: "uniform, N=10", nodes: 10},
		{name: "uniform, N=30", nodes: 30},
		{name: "cut 200 ms, heal", events: []simEvent{
			{5 * time.Second, func(c *simCluster) { c.net.Isolate("node-0") }},
			{5*time.Second + 200*time.Millisecond, func(c *simCluster) { c.net.Heal() }},
		}, fairFrom: []time.Duration{7200 * time.Millisecond, 12 * time.Second}},
		{name: "load moves to all", load: func(t time.Duration, i int) float64 {
			if t < 5*time.Second {
				return map[bool]float64{true: 10, false: 0}[i == 0]
			}
			return 2
		}, fairFrom: []time.Duration{7 * time.Second, 12 * time.Second}},
		{name: "isolate (share)", events: isolateNode0, fairFrom: afterHeal},
		{name: "isolate (fail-closed)", events: isolateNode0, fairFrom: afterHeal,
			limOpts: []gopherpace.Option{gopherpace.WithPartitionPolicy(gopherpace.PartitionFailClosed)}},
		// The faults that make faults plays between real hosts, here from
		// 5 to 13 s with failure detection at 2 s (docs/accuracy.md,
		// "Real faults").
		{name: "one node cut off, 8 s", events: []simEvent{
			{5 * time.Second, func(c *simCluster) { c.net.Isolate("node-0") }},
			{13 * time.Second, func(c *simCluster) { c.net.Heal() }},
		}, netOpts: detect2s, fairFrom: []time.Duration{15 * time.Second}},
		{name: "one-way cut, 8 s (node-1 does not hear node-0)", events: []simEvent{
			{5 * time.Second, func(c *simCluster) { c.net.Cut(c.names(0), c.names(1)) }},
			{13 * time.Second, func(c *simCluster) { c.net.Heal() }},
		}, netOpts: detect2s, fairFrom: []time.Duration{15 * time.Second}},
		{name: "flapping link, 8 s (node-0 cut 1 s of every 2)", events: flapNode0(),
			netOpts: detect2s, fairFrom: []time.Duration{15 * time.Second}},
		{name: "5% loss on one node's link", events: []simEvent{{0, func(c *simCluster) { c.net.SetNodeLoss("node-0", 0.05) }}}},
		{name: "20% loss on one node's link", events: []simEvent{{0, func(c *simCluster) { c.net.SetNodeLoss("node-0", 0.20) }}}},
	}
}

var detect2s = []memtransport.Option{memtransport.WithFailureDetection(2 * time.Second)}

// flapNode0 cuts node-0 off for a second and back, four times from 5 s.
func flapNode0() []simEvent {
	var evs []simEvent
	for k := range 4 {
		at := 5*time.Second + time.Duration(2*k)*time.Second
		evs = append(evs, simEvent{at, func(c *simCluster) { c.net.Isolate("node-0") }},
			simEvent{at + time.Second, func(c *simCluster) { c.net.Heal() }})
	}
	return evs
}

// rolling replaces node i (0..4) at 2+3i s: the old one leaves (its
// goodbye said), and a new one starts, under a new name or the same one.
func rolling(sameName bool) []simEvent {
	var evs []simEvent
	for i := range 5 {
		evs = append(evs, simEvent{time.Duration(2+3*i) * time.Second, func(c *simCluster) {
			c.leave(i)
			if sameName {
				c.start(c.nodes[i])
				return
			}
			c.start(c.addNode("node-" + strconv.Itoa(5+i)))
		}})
	}
	return evs
}

// eightyOnNode0 offers 4R to five nodes: 80% of it to node 0, 5% to each
// of the other four.
func eightyOnNode0(_ time.Duration, i int) float64 {
	if i == 0 {
		return 4 * 0.8
	}
	return 4 * 0.2 / 4
}

// afterHeal: the fairness windows of a partition from 5 to 10 s.
var afterHeal = []time.Duration{12 * time.Second, 15 * time.Second}

// partition32For8s splits 3/2 from 5 s to 13 s, longer than failure
// detection.
var partition32For8s = []simEvent{
	{5 * time.Second, func(c *simCluster) { c.net.Partition(c.names(0, 1, 2), c.names(3, 4)) }},
	{13 * time.Second, func(c *simCluster) { c.net.Heal() }},
}

var isolateNode0 = []simEvent{
	{5 * time.Second, func(c *simCluster) { c.net.Isolate("node-0") }},
	{10 * time.Second, func(c *simCluster) { c.net.Heal() }},
}

func TestAccuracy(t *testing.T) {
	for _, sc := range accuracyScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			c := runScenario(t, sc, false)
			r := c.measure()
			R, B := float64(c.sc.rate), c.sc.bucketSize
			t.Logf("total %d (ideal %d, %+.2f%%), worst window overshoot %d, %.0f frames/s, %.0f B/s, missing %d",
				r.total, r.ideal, r.errPct, r.worstOver, r.framesPerSec, r.bytesPerSec, r.missingFrames)
			if r.malformedCount != 0 {
				t.Errorf("%d frames malformed on a clean network", r.malformedCount)
			}
			// One bucket from every client's seat: in every window of
			// sustained load, each node admits the same share of what it is
			// offered as the cluster does, within 10%.
			if r.unfair > 0.10 {
				t.Errorf("a node's admitted/offered is %.0f%% off the cluster's; bound 10%%: admitted %v", 100*r.unfair, r.unfairSplit)
			}
			window := func() {
				if r.worstOver > B/10 {
					t.Errorf("a window admitted %d over R·w+B; bound is 10%% of B (%d)", r.worstOver, B/10)
				}
			}
			total := func(pct float64) {
				if math.Abs(r.errPct) > pct {
					t.Errorf("total %d is %+.2f%% off R·t+B = %d; bound ±%.0f%%", r.total, r.errPct, r.ideal, pct)
				}
			}
			between := func(what string, got, lo, hi float64) {
				if got < lo || got > hi {
					t.Errorf("%s: %.0f/s, want within [%.0f, %.0f]", what, got, lo, hi)
				}
			}
			switch sc.name {
			case "uniform", "flash", "uniform, N=10", "uniform, N=30":
				total(1)
				window()
				// Equal demand, equal shares: no node may win the bucket.
				mean := float64(r.total) / float64(len(r.perNode))
				for i, n := range r.perNode {
					if math.Abs(float64(n)-mean) > 0.1*mean {
						t.Errorf("node %d admitted %d, more than 10%% off the mean %.0f: %v", i, n, mean, r.perNode)
					}
				}
			case "cut 200 ms, heal", "load moves to all":
				total(1)
				window()
			case "skew", "shift", "skew 80/5/5/5/5, busy node starved":
				total(1)
				window()
			case "loss10", "loss10+dup+reorder":
				total(2)
				window()
			case "join", "restart":
				window()
			case "leave":
				window()
				// Full rate within one interval of the goodbye.
				between("rate after leave", c.rate(10*time.Second+c.sc.interval, 15*time.Second), 0.98*R, 1.02*R)
			case "rolling deploy", "rolling restart, same names", "scale-out 3 → 5", "scale-in 5 → 3":
				total(1)
				window()
			case "crash":
				window()
				// Until failure detection agrees (2 s), a crash looks like a
				// partition: the survivors share R·4/5. Then the whole rate,
				// long before the grace period (10 s) ends.
				between("rate before failure detection agrees", c.rate(5500*time.Millisecond, 7*time.Second), 0.98*R*4/5, 1.01*R)
				between("rate within a second of detection", c.rate(8*time.Second, 20*time.Second), 0.98*R, 1.02*R)
			case "crash, its port refusing":
				window()
				// The survivors know it gone within a tick of its silence:
				// the whole rate from then on.
				between("rate from 200 ms after the crash", c.rate(5200*time.Millisecond, 20*time.Second), 0.98*R, 1.02*R)
			case "partition 3/2, 8 s", "partition 3/2, 8 s (fail-closed)":
				// Once detection agrees (2 s in), the majority admits the
				// rate; the minority keeps its share, 2/5 of R, under share,
				// and nothing under fail-closed. So the cluster admits R·t +
				// B plus, under share, the minority's share from detection
				// to the heal.
				minority := 0.4 * R
				if sc.name != "partition 3/2, 8 s" {
					minority = 0
				}
				if over := int64(minority*6) + B/10; r.worstOver > over {
					t.Errorf("a window admitted %d over R·w+B during the partition; bound B/10 + the minority's share for the 6 s after detection (%d)", r.worstOver, over)
				}
				between("rate during the partition", c.rate(5*time.Second, 13*time.Second), 0.9*R, 1.05*R+minority*6/8)
				between("the majority's rate", c.nodeRate(0, 8*time.Second, 13*time.Second)+c.nodeRate(1, 8*time.Second, 13*time.Second)+c.nodeRate(2, 8*time.Second, 13*time.Second), 0.98*R, 1.02*R)
				between("the minority's rate", c.nodeRate(3, 8*time.Second, 13*time.Second)+c.nodeRate(4, 8*time.Second, 13*time.Second), 0.98*minority, 1.02*minority+0.01*R)
				for s := 15 * time.Second; s < 20*time.Second; s += time.Second {
					between("a second after the heal", c.rate(s, s+time.Second), 0.9*R, 1.1*R)
				}
			case "partition 3/2":
				partitionWindow(t, r, B)
				between("rate during the partition", c.rate(5*time.Second, 10*time.Second), 0.9*R, 1.05*R)
				between("rate from 2 s after the heal", c.rate(12*time.Second, 20*time.Second), 0.98*R, 1.02*R)
				for s := 10 * time.Second; s < 20*time.Second; s += time.Second {
					between("a second after the heal (no stall)", c.rate(s, s+time.Second), 0.85*R, 1.1*R)
				}
			case "isolate (share)":
				partitionWindow(t, r, B)
				between("cluster rate while node-0 is isolated", c.rate(5*time.Second, 10*time.Second), 0.9*R, 1.05*R)
			case "one node cut off, 8 s":
				// The cut node, a minority of one, keeps its share, R/5,
				// once detection agrees (2 s in); the rest take R.
				if over := int64(0.2*R*6) + B/10; r.worstOver > over {
					t.Errorf("a window admitted %d over R·w+B; bound B/10 + the cut node's share for 6 s (%d)", r.worstOver, over)
				}
				between("the others' rate once detection agrees", c.rate(8*time.Second, 13*time.Second)-c.nodeRate(0, 8*time.Second, 13*time.Second), 0.98*R, 1.02*R)
				between("the cut node's rate", c.nodeRate(0, 8*time.Second, 13*time.Second), 0.19*R, 0.21*R)
				between("the rate from 2 s after the heal", c.rate(15*time.Second, 20*time.Second), 0.98*R, 1.02*R)
			case "one-way cut, 8 s (node-1 does not hear node-0)":
				// Nobody is declared dead: the deaf node takes the silent
				// one's share out, so the cluster admits a little under R.
				window()
				between("the rate during the fault", c.rate(5*time.Second, 13*time.Second), 0.8*R, 1.02*R)
				between("the rate from 2 s after the heal", c.rate(15*time.Second, 20*time.Second), 0.98*R, 1.02*R)
			case "flapping link, 8 s (node-0 cut 1 s of every 2)":
				// Each cut lets both sides refill at R for the 60 ms before
				// they withhold each other's shares: R·0.06 more per cut,
				// which a window spanning all four cuts adds up.
				if over := B/10 + int64(4*0.06*R); r.worstOver > over {
					t.Errorf("a window admitted %d over R·w+B; bound B/10 + R·0.06 for each of 4 cuts (%d)", r.worstOver, over)
				}
				between("the rate during the fault", c.rate(5*time.Second, 13*time.Second), 0.8*R, 1.05*R)
				between("the rate from 2 s after the heal", c.rate(15*time.Second, 20*time.Second), 0.98*R, 1.02*R)
			case "5% loss on one node's link", "20% loss on one node's link":
				total(1)
				window()
			case "isolate (fail-closed)":
				partitionWindow(t, r, B)
				between("cluster rate while node-0 is isolated", c.rate(5*time.Second, 10*time.Second), 0.75*R, 1.05*R)
				// Detection takes up to 1.5 intervals plus a tick.
				if got := c.nodeRate(0, 5*time.Second+250*time.Millisecond, 10*time.Second); got != 0 {
					t.Errorf("isolated fail-closed node admitted %.0f/s", got)
				}
			}
		})
	}
}

// partitionWindow bounds the worst window of a partition scenario. A cut
// cannot be told from a slow network until peers have been silent for a
// heartbeat and a little more; until then each side refills at the full
// rate (internal/cluster/membership.go). The bound is the ordinary one, a tenth of B.
func partitionWindow(t *testing.T, r result, bucketSize int64) {
	t.Helper()
	if r.worstOver > bucketSize/10 {
		t.Errorf("a window admitted %d over R·w+B during a partition; bound is 10%% of B (%d)", r.worstOver, bucketSize/10)
	}
}

// The reference design's floor-at-zero rule through the same harness: it
// admits about N×R under uniform overload, exact only under full skew.
func TestBaselineFloorAtZeroOverAdmits(t *testing.T) {
	c := runScenario(t, scenario{name: "uniform"}, true)
	r := c.measure()
	t.Logf("baseline uniform: total %d (%+.0f%%)", r.total, r.errPct)
	if r.total < 3*r.ideal {
		t.Fatalf("baseline admitted %d, expected about N×R (≥ 3× the ideal %d): the harness cannot tell the designs apart", r.total, r.ideal)
	}
	c = runScenario(t, scenario{name: "skew", load: onNode(10, 0)}, true)
	if r := c.measure(); math.Abs(r.errPct) > 2 {
		t.Fatalf("baseline under full skew: %+.2f%%, expected about exact", r.errPct)
	}
}

// Keyed buckets hold their limits cluster-wide too: 20 keys, each offered
// 10×R spread over 5 nodes for 10 s, each admitted within ±2% of R·t+B.
func TestAccuracyKeyed(t *testing.T) {
	const nodes, keys, rate, bucketSize = 5, 20, 100, 100
	const duration = 10 * time.Second
	net := memtransport.New(memtransport.WithRandom(3))
	var lims []*gopherpace.Limiter
	var trs []*memtransport.Transport
	for i := range nodes {
		tr, err := net.Join(fmt.Sprint("k", i))
		if err != nil {
			t.Fatal(err)
		}
		trs = append(trs, tr)
	}
	for i, tr := range trs {
		l, err := gopherpace.New(gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(bucketSize),
			gopherpace.WithTransport(tr), gopherpace.WithNodeName(fmt.Sprint("k", i)), gopherpace.WithLogger(discardLogger))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lims = append(lims, l)
	}
	admitted := make([]int, keys)
	// Each node offers each key 200/s (one request every 5 ms, the nodes at
	// different phases): 1000/s per key in total, 10×R.
	for ms := range int(duration / time.Millisecond) {
		now := net.Now()
		for n, l := range lims {
			if (ms+n)%5 != 0 {
				continue
			}
			for k := range keys {
				if d, _ := l.TakeAt(now, fmt.Sprint("tenant-", k), 1); d.Allowed {
					admitted[k]++
				}
			}
		}
		net.Advance(time.Millisecond)
	}
	ideal := float64(rate)*duration.Seconds() + bucketSize
	for k, got := range admitted {
		if errPct := 100 * (float64(got) - ideal) / ideal; math.Abs(errPct) > 2 {
			t.Errorf("key %d admitted %d, %+.2f%% off R·t+B = %.0f", k, got, errPct, ideal)
		}
	}
	t.Logf("per-key admitted %v (ideal %.0f)", admitted, ideal)
}

// Keyed buckets through the daily transitions: one key at R = B = 200
// offered 10×R over the nodes while nodes join, restart and are replaced.
// A node that joins a running cluster learns each key's level from the
// first report of it (internal/cluster/receiver.go, learnLevel), so it does not bring a fresh
// bucket per key: before, a join over-admitted by +3.1%, a rolling deploy
// by +9.5% and a rolling restart by +12.6%, with windows up to +578 over
// R·w+B, and a node's admit ratio up to 4.6 times off the cluster's.
func TestAccuracyKeyedTransitions(t *testing.T) {
	bounds := map[string]float64{"join": 1, "restart": 2.5, "rolling deploy": 1, "rolling restart, same names": 1, "scale-out 3 → 5": 1, "scale-in 5 → 3": 1}
	for _, sc := range accuracyScenarios() {
		bound, ok := bounds[sc.name]
		if !ok {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			sc.keys, sc.rate = 1, 200
			r := runScenario(t, sc, false).measure()
			t.Logf("total %+.2f%%, worst window %+d, worst node's admit ratio %.3f off the cluster's", r.errPct, r.worstOver, r.unfair)
			if math.Abs(r.errPct) > bound {
				t.Errorf("total %+.2f%% off R·t+B, bound ±%.1f%%", r.errPct, bound)
			}
			if r.worstOver > sc.rate/10 {
				t.Errorf("a window admitted %d over R·w+B, bound %d", r.worstOver, sc.rate/10)
			}
			// The global bucket holds 10% here; a hot key's shares take a
			// moment longer to count a newcomer's load (design.md).
			if r.unfair > 0.2 {
				t.Errorf("a node's admit ratio was %.3f off the cluster's, bound 0.2", r.unfair)
			}
		})
	}
}
