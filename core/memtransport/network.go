package memtransport

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// Network connects in-memory transports through a simulated, virtual-time
// network. A Network is safe for concurrent use, but events run on the
// goroutine that calls Advance.
type Network struct {
	mu       sync.Mutex
	now      time.Time
	events   eventQueue
	nextID   uint64
	rng      *rand.Rand
	nodes    map[string]*Transport
	sorted   []*Transport // nodes in name order; nil once a node joins
	latency  time.Duration
	jitter   time.Duration
	linkLag  func(from, to string) time.Duration
	zone     func(name string) string
	observe  func(from, to string, size int)
	loss     float64
	dup      float64
	cut      map[link]time.Time // when each cut link was cut
	oneWay   map[link]bool      // links that drop frames but not membership (Cut)
	nodeLoss map[string]float64 // the loss on each node's own link (SetNodeLoss)
	maxFrame int
	detect   time.Duration
	running  bool
	realTime bool
	secret   []byte
}

// DefaultKeyHashSecret is every network's key hash secret unless
// WithKeyHashSecret sets another: fixed, so that simulations repeat
// exactly, and public, as a simulation needs no secret.
var DefaultKeyHashSecret = []byte("memtransport: a simulated cluster's key hash secret")

type link struct{ from, to string }

// Option configures a Network.
type Option func(*Network)

// WithRandom sets the state of the network's random generator (loss,
// duplication, jitter), so that a run repeats exactly.
func WithRandom(state uint64) Option {
	return func(n *Network) { n.rng = rand.New(rand.NewPCG(state, state^0x9e3779b97f4a7c15)) }
}

// WithLatency sets each frame's delay: base plus a uniform random jitter in
// [0, jitter). Jitter reorders frames. Default 1 ms, no jitter.
func WithLatency(base, jitter time.Duration) Option {
	return func(n *Network) { n.latency, n.jitter = base, jitter }
}

// WithLinkLatency adds lag(from, to) to every frame on that link, on top
// of WithLatency's: regions, for example, with a long way between them.
func WithLinkLatency(lag func(from, to string) time.Duration) Option {
	return func(n *Network) { n.linkLag = lag }
}

// WithZones gives every node the zone zone(name): each Transport is a
// gopherpace.Zoner, so that the limiters' groups follow the zones.
func WithZones(zone func(name string) string) Option {
	return func(n *Network) { n.zone = zone }
}

// WithObserver calls observe with every datagram put on a link (each
// peer of a broadcast, each copy of a duplicate; not those lost or cut),
// for tests that count traffic by link: between regions, say. It runs
// with the network's lock held and must not call the network.
func WithObserver(observe func(from, to string, size int)) Option {
	return func(n *Network) { n.observe = observe }
}

// WithLoss drops each delivery with probability p.
func WithLoss(p float64) Option { return func(n *Network) { n.loss = p } }

// WithDuplication delivers each frame a second time with probability p.
func WithDuplication(p float64) Option { return func(n *Network) { n.dup = p } }

// WithMaxFrameSize sets the largest frame a transport accepts. Default 1350.
func WithMaxFrameSize(b int) Option { return func(n *Network) { n.maxFrame = b } }

// WithFailureDetection sets how long peers keep listing a crashed node, or
// one whose link to them is cut, as a member: memberlist's failure
// detection (probes, indirect probes and the suspicion timeout). Default
// 5 s.
func WithFailureDetection(d time.Duration) Option { return func(n *Network) { n.detect = d } }

// WithKeyHashSecret sets the secret every node's limiters hash keys with
// (gopherpace.KeyHashSecreter); at least 16 bytes.
func WithKeyHashSecret(secret []byte) Option {
	return func(n *Network) { n.secret = append([]byte(nil), secret...) }
}

// WithRealTime runs the network on the real clock instead of a virtual
// one: frames arrive after their latency without anyone calling Advance,
// and limiters run on real timers. Use it behind real servers in tests of
// adapters, where requests come at real times.
func WithRealTime() Option { return func(n *Network) { n.realTime = true } }

// New returns an empty network whose clock starts at the current time.
func New(opts ...Option) *Network {
	n := &Network{
		now:      time.Now(),
		rng:      rand.New(rand.NewPCG(1, 2)),
		nodes:    make(map[string]*Transport),
		latency:  time.Millisecond,
		cut:      make(map[link]time.Time),
		maxFrame: 1350,
		detect:   5 * time.Second,
		secret:   DefaultKeyHashSecret,
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

// Now is the network's virtual time (the real time WithRealTime).
func (n *Network) Now() time.Time {
	if n.realTime {
		return time.Now()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.now
}

// AfterFunc schedules f to run d from now, when Advance reaches it.
func (n *Network) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	if n.realTime {
		return time.AfterFunc(d, f).Stop
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	ev := n.scheduleLocked(max(0, d), f)
	return func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		if ev.index < 0 {
			return false
		}
		heap.Remove(&n.events, ev.index)
		return true
	}
}

func (n *Network) scheduleLocked(d time.Duration, f func()) *event {
	if n.realTime {
		time.AfterFunc(d, f)
		return nil
	}
	n.nextID++
	ev := &event{at: n.now.Add(d), id: n.nextID, run: f}
	heap.Push(&n.events, ev)
	return ev
}

// Advance moves the clock forward by d, running every event due by then in
// time order (ties in the order they were scheduled). Events may schedule
// more events; those due by the new time run too. On a real-time network it
// does nothing: time passes by itself.
func (n *Network) Advance(d time.Duration) {
	if n.realTime {
		return
	}
	n.mu.Lock()
	if n.running {
		n.mu.Unlock()
		panic("memtransport: Advance called from inside an event")
	}
	n.running = true
	end := n.now.Add(d)
	for len(n.events) > 0 && !n.events[0].at.After(end) {
		ev := heap.Pop(&n.events).(*event)
		n.now = ev.at
		n.mu.Unlock()
		ev.run()
		n.mu.Lock()
	}
	n.now = end
	n.running = false
	n.mu.Unlock()
}

// Join adds a node. A name can be reused once its previous holder has left
// or crashed: that is a restart.
func (n *Network) Join(name string) (*Transport, error) {
	if name == "" {
		return nil, errors.New("memtransport: empty node name")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if old, ok := n.nodes[name]; ok && old.alive {
		return nil, fmt.Errorf("memtransport: node %q is already in the network", name)
	}
	t := &Transport{net: n, name: name, alive: true}
	n.nodes[name] = t
	n.sorted = nil
	return t, nil
}

// Partition cuts every link between a node of a and a node of b, both ways.
func (n *Network) Partition(a, b []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range a {
		for _, y := range b {
			at := n.nowLocked()
			n.cut[link{x, y}], n.cut[link{y, x}] = at, at
		}
	}
}

// Isolate cuts name off from every other node.
func (n *Network) Isolate(name string) {
	n.mu.Lock()
	others := make([]string, 0, len(n.nodes))
	for other := range n.nodes {
		if other != name {
			others = append(others, other)
		}
	}
	n.mu.Unlock()
	n.Partition([]string{name}, others)
}

// Cut drops every frame from a node of from to a node of to, one way
// only. Unlike Partition it leaves the member lists alone: memberlist's
// indirect probes, through members that still hear both, keep each side
// listing the other, so a one-way cut looks to the deaf side like a peer
// gone silent, not like a crash.
func (n *Network) Cut(from, to []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.oneWay == nil {
		n.oneWay = make(map[link]bool)
	}
	for _, x := range from {
		for _, y := range to {
			n.oneWay[link{x, y}] = true
		}
	}
}

// SetNodeLoss sets the chance, from 0 to 1, that a frame to or from name
// is lost on name's own link, on top of the network's loss (WithLoss).
func (n *Network) SetNodeLoss(name string, p float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.nodeLoss == nil {
		n.nodeLoss = make(map[string]float64)
	}
	n.nodeLoss[name] = p
}

// Heal restores every cut link, one-way cuts included.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut = make(map[link]time.Time)
	n.oneWay = nil
}

// broadcast schedules frame from one node to every other live one.
func (n *Network) broadcast(from *Transport, frame []byte) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.checkSendLocked(from, frame); err != nil {
		return err
	}
	for _, to := range n.sortedNodesLocked() {
		if to != from {
			n.sendLocked(from, to, frame)
		}
	}
	return nil
}

// sendTo schedules frame from one node to the node named to, if it is in
// the network; a node that is not is a frame lost, as UDP loses it.
func (n *Network) sendTo(from *Transport, to string, frame []byte) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.checkSendLocked(from, frame); err != nil {
		return err
	}
	if dst := n.nodes[to]; dst != nil && dst != from {
		n.sendLocked(from, dst, frame)
	}
	return nil
}

func (n *Network) checkSendLocked(from *Transport, frame []byte) error {
	if !from.alive {
		return errors.New("memtransport: transport is closed")
	}
	if len(frame) > n.maxFrame {
		return fmt.Errorf("memtransport: frame of %d bytes exceeds the %d-byte limit", len(frame), n.maxFrame)
	}
	return nil
}

// sendLocked schedules one copy of frame (or two, or none) from one node
// to another, subject to the links' latency, loss, duplication and cuts.
func (n *Network) sendLocked(from, to *Transport, frame []byte) {
	if !to.alive || n.isCut(from.name, to.name) || n.oneWay[link{from.name, to.name}] {
		return
	}
	copies := 1
	if n.dup > 0 && n.rng.Float64() < n.dup {
		copies = 2
	}
	for range copies {
		if n.loss > 0 && n.rng.Float64() < n.loss {
			continue
		}
		if p := n.nodeLoss[from.name]; p > 0 && n.rng.Float64() < p {
			continue
		}
		if p := n.nodeLoss[to.name]; p > 0 && n.rng.Float64() < p {
			continue
		}
		delay := n.latency
		if n.jitter > 0 {
			delay += time.Duration(n.rng.Int64N(int64(n.jitter)))
		}
		if n.linkLag != nil {
			delay += n.linkLag(from.name, to.name)
		}
		if n.observe != nil {
			n.observe(from.name, to.name, len(frame))
		}
		data := append([]byte(nil), frame...)
		dst, src := to, from.name
		n.scheduleLocked(delay, func() { dst.deliver(src, data) })
	}
}

// sortedNodesLocked lists nodes in name order, so that a seed always draws
// the same random numbers for the same deliveries. The list is kept until
// a node joins: sorted again for every broadcast, it took a fifth of a
// 300-node simulation. Callers must not change it.
func (n *Network) sortedNodesLocked() []*Transport {
	if n.sorted == nil {
		n.sorted = make([]*Transport, 0, len(n.nodes))
		for _, t := range n.nodes {
			n.sorted = append(n.sorted, t)
		}
		slices.SortFunc(n.sorted, func(a, b *Transport) int { return strings.Compare(a.name, b.name) })
	}
	return n.sorted
}

func (n *Network) membersLocked(self *Transport) []string {
	var names []string
	for _, t := range n.sortedNodesLocked() {
		if t == self {
			continue
		}
		// As memberlist's failure detector does, a node crashed or cut off
		// for longer than the detection time is no longer listed.
		cutAt, cut := n.cut[link{self.name, t.name}]
		if cut && n.nowLocked().Sub(cutAt) >= n.detect {
			continue
		}
		if t.alive || (t.crashed && n.nowLocked().Sub(t.crashedAt) < n.detect) {
			names = append(names, t.name)
		}
	}
	return names
}

func (n *Network) isCut(from, to string) bool {
	_, cut := n.cut[link{from, to}]
	return cut
}

func (n *Network) nowLocked() time.Time {
	if n.realTime {
		return time.Now()
	}
	return n.now
}

type event struct {
	at    time.Time
	id    uint64
	run   func()
	index int
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at.Equal(q[j].at) {
		return q[i].id < q[j].id
	}
	return q[i].at.Before(q[j].at)
}
func (q eventQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *eventQueue) Push(x any) {
	ev := x.(*event)
	ev.index = len(*q)
	*q = append(*q, ev)
}
func (q *eventQueue) Pop() any {
	old := *q
	ev := old[len(old)-1]
	old[len(old)-1] = nil
	ev.index = -1
	*q = old[:len(old)-1]
	return ev
}
