package gopherpace_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// The accuracy harness: N limiters gossiping over a memtransport network in
// virtual time. Each node's requests arrive as a Poisson process of its own
// (the rate may change every 1 ms step), and every request is decided at
// its own instant, in time order across the cluster, with the network's
// timers and deliveries run in between: lockstep arrivals, where every
// node's requests fall at the same instants, hide how the nodes share the
// bucket. Every offer and admit is recorded per millisecond, so that totals,
// worst windows and per-node shares can be measured exactly.

const step = time.Millisecond

type scenario struct {
	name       string
	nodes      int // nodes at the start
	rate       int64
	bucketSize int64
	interval   time.Duration
	duration   time.Duration
	netOpts    []memtransport.Option
	limOpts    []gopherpace.Option
	// load is node i's offered requests per second at time t.
	load func(t time.Duration, i int) float64
	// flash offers every node twice the bucket size in requests at t=0.
	flash bool
	// keys, when set, sends every request to one of that many keyed
	// buckets, uniformly at random (the rate and the bucket size are then
	// each key's).
	keys int
	// events change the cluster at given times.
	events []simEvent
	// fairFrom lists the starts of the 5 s windows over which each node's
	// admitted/offered must match the cluster's; nil: 2, 7 and 12 s.
	fairFrom []time.Duration
	// lockstep puts every node's requests at the same fixed instants (the
	// start of a step, once the node's offered rate has built up a whole
	// request) instead of Poisson arrivals at random instants.
	lockstep bool
	// starved lists nodes whose process a busy CPU runs in slices: each
	// sits out 5 to 30 ms at a time, runs 1 to 10 ms, and on waking
	// decides at once every request that arrived while it sat out.
	starved []int
}

type simEvent struct {
	at time.Duration
	do func(c *simCluster)
}

type simNode struct {
	name string
	tr   *memtransport.Transport
	lim  *gopherpace.Limiter
	up   bool
	// offered and admitted per step since the start of the run.
	offered, admitted []int32
	// A starved node (scenario.starved) sits out the steps before
	// wakeAt and runs until sleepAt; backlog holds the requests that
	// arrived while it sat out.
	wakeAt, sleepAt int
	backlog         int
	// due is the offered requests built up and not yet arrived, in
	// lockstep.
	due float64
}

type simCluster struct {
	t        testing.TB
	sc       *scenario
	net      *memtransport.Network
	nodes    []*simNode
	baseline bool
	steps    int
	rng      *rand.Rand
	keyNames []string
}

// arrival is one request: when, and at which node.
type arrival struct {
	at   time.Time
	node *simNode
	step int
}

func defaults(sc scenario) scenario {
	if sc.nodes == 0 {
		sc.nodes = 5
	}
	if sc.rate == 0 {
		sc.rate = 1000
	}
	if sc.bucketSize == 0 {
		sc.bucketSize = sc.rate
	}
	if sc.interval == 0 {
		sc.interval = 100 * time.Millisecond
	}
	if sc.duration == 0 {
		sc.duration = 20 * time.Second
	}
	if sc.load == nil {
		sc.load = uniform(10)
	}
	return sc
}

// uniform offers mult×R spread evenly over the nodes that are up.
func uniform(mult float64) func(time.Duration, int) float64 {
	return func(time.Duration, int) float64 { return -mult } // negative: share of the total
}

// onNode offers mult×R to node i only.
func onNode(mult float64, i int) func(time.Duration, int) float64 {
	return func(_ time.Duration, j int) float64 {
		if j == i {
			return mult
		}
		return 0
	}
}

func runScenario(t testing.TB, sc scenario, baseline bool) *simCluster {
	sc = defaults(sc)
	c := &simCluster{t: t, sc: &sc, baseline: baseline, steps: int(sc.duration / step), rng: rand.New(rand.NewPCG(11, 13))}
	// 1 ms ± 0.5 ms delivery unless the scenario says otherwise: jitter
	// reorders frames, as a real network does.
	opts := append([]memtransport.Option{memtransport.WithRandom(7), memtransport.WithLatency(750*time.Microsecond, 500*time.Microsecond)}, sc.netOpts...)
	c.net = memtransport.New(opts...)
	// A cold start: the nodes find each other (as memberlist does through
	// its seeds) before their limiters start serving.
	for i := range sc.nodes {
		c.join(c.addNode(fmt.Sprintf("node-%d", i)))
	}
	for _, n := range c.nodes {
		c.startLimiter(n)
	}
	events := sc.events
	var batch []arrival
	for s := 0; s < c.steps; s++ {
		at := time.Duration(s) * step
		for len(events) > 0 && events[0].at <= at {
			events[0].do(c)
			events = events[1:]
		}
		start := c.net.Now()
		batch = c.arrivals(batch[:0], s, at, start)
		for _, a := range batch {
			if d := a.at.Sub(c.net.Now()); d > 0 {
				c.net.Advance(d)
			}
			if !a.node.up {
				continue
			}
			a.node.offered[a.step]++
			if c.decide(a.node.lim) {
				a.node.admitted[a.step]++
			}
		}
		c.net.Advance(start.Add(step).Sub(c.net.Now()))
	}
	for _, n := range c.nodes {
		if n.lim != nil {
			n.lim.Close()
		}
	}
	return c
}

// decide asks l for one token now: of the global bucket, or of a random
// key's when the scenario has keys.
func (c *simCluster) decide(l *gopherpace.Limiter) bool {
	if c.sc.keys == 0 {
		ok, _ := l.AllowAt(c.net.Now())
		return ok
	}
	if c.keyNames == nil {
		for k := range c.sc.keys {
			c.keyNames = append(c.keyNames, fmt.Sprint("key-", k))
		}
	}
	d, _ := l.TakeAt(c.net.Now(), c.keyNames[c.rng.IntN(c.sc.keys)], 1)
	return d.Allowed
}

// arrivals appends the requests of step s (starting at start) to batch, in
// time order: a Poisson number per node at the node's offered rate, each
// at a uniformly random instant of the step.
func (c *simCluster) arrivals(batch []arrival, s int, at time.Duration, start time.Time) []arrival {
	sc := c.sc
	up := 0
	for _, n := range c.nodes {
		if n.up {
			up++
		}
	}
	for i, n := range c.nodes {
		if !n.up {
			continue
		}
		offered := sc.load(at, i)
		if offered < 0 { // a share of a cluster-wide multiple of R
			offered = -offered * float64(sc.rate) / float64(up)
		} else {
			offered *= float64(sc.rate)
		}
		var k int
		if sc.lockstep {
			n.due += offered * step.Seconds()
			k = int(n.due)
			n.due -= float64(k)
		} else {
			k = poisson(c.rng, offered*step.Seconds())
		}
		if slices.Contains(sc.starved, i) {
			if s >= n.sleepAt {
				n.wakeAt = s + 5 + c.rng.IntN(26)
				n.sleepAt = n.wakeAt + 1 + c.rng.IntN(10)
			}
			if s < n.wakeAt {
				n.backlog += k
				k = 0
			} else {
				// Woken: what queued while it sat out, all at the
				// step's first instant.
				for range n.backlog {
					batch = append(batch, arrival{start, n, s})
				}
				n.backlog = 0
			}
		}
		for range k {
			at := start
			if !sc.lockstep {
				at = start.Add(time.Duration(c.rng.Int64N(int64(step))))
			}
			batch = append(batch, arrival{at, n, s})
		}
		if s == 0 && sc.flash {
			for range 2 * sc.bucketSize { // a flash crowd: all at the first instant
				batch = append(batch, arrival{start, n, s})
			}
		}
	}
	slices.SortStableFunc(batch, func(a, b arrival) int { return a.at.Compare(b.at) })
	return batch
}

// poisson draws a Poisson variate of mean lambda (small: Knuth's method).
func poisson(rng *rand.Rand, lambda float64) int {
	limit, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= limit {
			return k
		}
		k++
	}
}

func (c *simCluster) addNode(name string) *simNode {
	n := &simNode{name: name, offered: make([]int32, c.steps), admitted: make([]int32, c.steps)}
	c.nodes = append(c.nodes, n)
	return n
}

// start joins n to the network and starts its limiter.
func (c *simCluster) start(n *simNode) {
	c.join(n)
	c.startLimiter(n)
}

func (c *simCluster) join(n *simNode) {
	tr, err := c.net.Join(n.name)
	if err != nil {
		c.t.Fatal(err)
	}
	n.tr = tr
}

func (c *simCluster) startLimiter(n *simNode) {
	tr := n.tr
	opts := []gopherpace.Option{
		gopherpace.WithRefillRate(c.sc.rate), gopherpace.WithBucketSize(c.sc.bucketSize),
		gopherpace.WithGossipInterval(c.sc.interval), gopherpace.WithNodeName(n.name),
		gopherpace.WithTransport(tr), gopherpace.WithLogger(discardLogger),
	}
	if c.baseline {
		opts = append(opts, gopherpace.WithFloorAtZero())
	}
	lim, err := gopherpace.New(append(opts, c.sc.limOpts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	n.tr, n.lim, n.up = tr, lim, true
}

func (c *simCluster) names(idx ...int) []string {
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = c.nodes[j].name
	}
	return out
}

// crash stops a node without a goodbye.
// crash stops node i with its machine, as a node failure does: nothing
// answers for it, and only failure detection tells its peers.
// evenAndOdd splits the names of a cluster of n nodes in two halves, the
// even-numbered nodes and the odd, so that every group is split across
// the cut between them.
func evenAndOdd(n int) (even, odd []string) {
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		if i%2 == 0 {
			even = append(even, name)
		} else {
			odd = append(odd, name)
		}
	}
	return even, odd
}

func (c *simCluster) crash(i int) {
	n := c.nodes[i]
	n.tr.CrashHost()
	n.up = false
}

// crashProcess stops node i's process alone: its host refuses connections
// to its port, which tells its peers within a tick of its silence.
func (c *simCluster) crashProcess(i int) {
	n := c.nodes[i]
	n.tr.Crash()
	n.up = false
}

// leave closes a node's limiter (which says goodbye), then its transport.
func (c *simCluster) leave(i int) {
	n := c.nodes[i]
	n.lim.Close()
	n.tr.Close()
	n.up = false
}

// ---- measurements ----

type result struct {
	// unfair is the largest |node's admitted/offered ÷ the cluster's − 1|
	// over the scenario's fairness windows and the nodes offered load in
	// them; split is the admitted per node in the window where it was.
	unfair       float64
	unfairSplit  []int64
	total, ideal int64
	errPct       float64
	worstOver    int64 // max over windows ≥ 1 s of admitted − (R·w + B)
	framesPerSec float64
	bytesPerSec  float64
	// peerDatagramsPerSec and peerBytesPerSec are what the nodes sent to
	// their peers, a datagram or frame to each peer counted once per peer,
	// per node: what a node's network interface carries.
	peerDatagramsPerSec, peerBytesPerSec float64
	perNode                              []int64
	missingFrames                        uint64
	malformedCount                       uint64
}

func (c *simCluster) series() []int64 {
	s := make([]int64, c.steps)
	for _, n := range c.nodes {
		for i, a := range n.admitted {
			s[i] += int64(a)
		}
	}
	return s
}

func (c *simCluster) measure() result {
	sc := c.sc
	s := c.series()
	var r result
	for _, v := range s {
		r.total += v
	}
	r.ideal = sc.rate*int64(sc.duration/time.Second) + sc.bucketSize
	r.errPct = 100 * float64(r.total-r.ideal) / float64(r.ideal)
	r.worstOver = worstWindow(s, sc.rate, sc.bucketSize, int(time.Second/step))
	var frames, bytes uint64
	for _, n := range c.nodes {
		var sum int64
		for _, a := range n.admitted {
			sum += int64(a)
		}
		r.perNode = append(r.perNode, sum)
		st := n.lim.Stats()
		frames += st.FramesSent
		bytes += st.BytesSent
		r.peerDatagramsPerSec += float64(st.DatagramsToPeers)
		r.peerBytesPerSec += float64(st.BytesToPeers)
		r.missingFrames += st.FramesMissing
		r.malformedCount += st.FramesMalformed
	}
	r.framesPerSec = float64(frames) / sc.duration.Seconds()
	r.bytesPerSec = float64(bytes) / sc.duration.Seconds()
	r.peerDatagramsPerSec /= sc.duration.Seconds() * float64(len(c.nodes))
	r.peerBytesPerSec /= sc.duration.Seconds() * float64(len(c.nodes))
	from := sc.fairFrom
	if from == nil {
		from = []time.Duration{2 * time.Second, 7 * time.Second, 12 * time.Second}
	}
	for _, f := range from {
		if u, split := c.unfairness(f, f+5*time.Second); u > r.unfair || r.unfairSplit == nil {
			r.unfair, r.unfairSplit = u, split
		}
	}
	return r
}

// unfairness is the largest relative gap between a node's admitted/offered
// and the cluster's over [from, to), among nodes offered at least 1% of the
// window's requests, and what each node admitted.
func (c *simCluster) unfairness(from, to time.Duration) (float64, []int64) {
	lo, hi := int(from/step), min(int(to/step), c.steps)
	offered, admitted := make([]int64, len(c.nodes)), make([]int64, len(c.nodes))
	var o, a int64
	for i, n := range c.nodes {
		for s := lo; s < hi; s++ {
			offered[i] += int64(n.offered[s])
			admitted[i] += int64(n.admitted[s])
		}
		o, a = o+offered[i], a+admitted[i]
	}
	if o == 0 || a == 0 {
		return 0, admitted
	}
	cluster := float64(a) / float64(o)
	worst := 0.0
	for i := range c.nodes {
		if offered[i]*100 < o {
			continue
		}
		worst = max(worst, math.Abs(float64(admitted[i])/float64(offered[i])/cluster-1))
	}
	return worst, admitted
}

// spread is the least and the most of the nodes' admitted/offered over
// [from, end), each against the cluster's: every node, however small its
// part of the load.
func (c *simCluster) spread(from time.Duration) (lo, hi float64) {
	return c.spreadOver(from, time.Duration(c.steps)*step)
}

// spreadOver is spread over [from, to).
func (c *simCluster) spreadOver(from, to time.Duration) (lo, hi float64) {
	first, last := int(from/step), min(int(to/step), c.steps)
	var o, a int64
	offered, admitted := make([]int64, len(c.nodes)), make([]int64, len(c.nodes))
	for i, n := range c.nodes {
		for s := first; s < last; s++ {
			offered[i] += int64(n.offered[s])
			admitted[i] += int64(n.admitted[s])
		}
		o, a = o+offered[i], a+admitted[i]
	}
	if o == 0 || a == 0 {
		return 0, 0
	}
	cluster := float64(a) / float64(o)
	lo, hi = math.Inf(1), math.Inf(-1)
	for i := range c.nodes {
		if offered[i] == 0 {
			continue
		}
		r := float64(admitted[i]) / float64(offered[i]) / cluster
		lo, hi = min(lo, r), max(hi, r)
	}
	return lo, hi
}

// worstWindow is the largest admitted − (R·w + B) over windows of at least
// minSteps steps, in O(n): with D(t) = admitted before t − R·t, a window
// [a, b) admits D(b) − D(a) + R·w.
func worstWindow(s []int64, rate, bucketSize int64, minSteps int) int64 {
	n := len(s)
	d := make([]float64, n+1)
	perStep := float64(rate) * step.Seconds()
	cum := 0.0
	for i := range n {
		d[i] = cum - perStep*float64(i)
		cum += float64(s[i])
	}
	d[n] = cum - perStep*float64(n)
	best := math.Inf(-1)
	minD := math.Inf(1)
	for b := minSteps; b <= n; b++ {
		minD = math.Min(minD, d[b-minSteps])
		best = math.Max(best, d[b]-minD)
	}
	return int64(math.Round(best)) - bucketSize
}

// bytesToPeers is every node's BytesToPeers, summed.
func (c *simCluster) bytesToPeers() uint64 {
	var sum uint64
	for _, n := range c.nodes {
		if n.lim != nil {
			sum += n.lim.Stats().BytesToPeers
		}
	}
	return sum
}

// rate is the admitted rate per second over [from, to).
func (c *simCluster) rate(from, to time.Duration) float64 {
	s := c.series()
	var sum int64
	for i := int(from / step); i < int(to/step) && i < len(s); i++ {
		sum += s[i]
	}
	return float64(sum) / (to - from).Seconds()
}

func (c *simCluster) nodeRate(i int, from, to time.Duration) float64 {
	var sum int64
	for j := int(from / step); j < int(to/step); j++ {
		sum += int64(c.nodes[i].admitted[j])
	}
	return float64(sum) / (to - from).Seconds()
}

// A simulation is the same on every run: its network, arrivals and
// limiters all run on one virtual clock and seeded randomness, and the
// engine goes over its peers in a fixed order, so two runs admit the same
// requests in the same milliseconds and make accuracy prints the same
// tables twice. Before, a map's random order of the peers moved a sum's
// last bits, and the limiters' epoch was the real time they started: the
// flash row read 21,001 and 21,002 on two runs.
func TestSimulationsRepeatExactly(t *testing.T) {
	for _, sc := range []scenario{
		{name: "flash", flash: true, duration: 3 * time.Second},
		{name: "uniform, N=100, interval 300ms", nodes: 100, interval: 300 * time.Millisecond, duration: 3 * time.Second},
	} {
		a, b := runScenario(t, sc, false), runScenario(t, sc, false)
		for i := range a.nodes {
			x, y := a.nodes[i].admitted, b.nodes[i].admitted
			for ms := range x {
				if x[ms] != y[ms] {
					t.Errorf("%s: %s admitted %d and then %d requests in millisecond %d on two runs of the same simulation (%d and %d in all)",
						sc.name, a.nodes[i].name, x[ms], y[ms], ms, sum32(x), sum32(y))
					break
				}
			}
		}
	}
}

func sum32(xs []int32) (n int64) {
	for _, x := range xs {
		n += int64(x)
	}
	return n
}
