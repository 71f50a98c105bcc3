package gopherpace

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/datagram"
	"github.com/pedreviljoen/gopherpace/core/internal/wire"
	"github.com/pedreviljoen/gopherpace/core/transportkit"
)

// topKeysGossip is a clustered limiter's top keys on the wire. Every
// second, while this node has any, it sends its TopKeysSent heaviest
// denied and admitted keys to its peers, by key hash alone (a key's text
// never leaves the node), in gauge frames under the limiter's top-keys
// ID; an empty frame follows when its lists empty. It keeps what each
// peer sent last, so that every node lists the cluster's top keys
// (ClusterTopKeys) without asking the others.
type topKeysGossip struct {
	l     *Limiter
	clock transportkit.Clock

	mu       sync.Mutex // everything below, and the link's sending and members
	link     *gaugeLink
	stopped  bool
	stopTick func() bool
	round    uint64 // this node's sends so far: a send's frames share one
	sentAny  bool   // the last send listed keys
	peers    map[string]*peerTopKeys
	gauges   []wire.Gauge
}

// peerTopKeys is what one incarnation of a peer sent last.
type peerTopKeys struct {
	inc, round uint64
	heard      int64 // this node's limiter time when its last frame came
	lists      [2][]hashedCount
}

// hashedCount is one key of a peer's lists: its hash stands for it.
type hashedCount struct {
	h            uint64
	count, error uint64
}

const (
	// TopKeysSent is how many keys of each list a node sends its peers
	// every second.
	TopKeysSent = 10
	// topKeysEvery spaces a node's sends of its top keys.
	topKeysEvery = time.Second
	// topKeysStale is how long a peer's lists count after they came: a
	// peer that stops sending has crashed or left.
	topKeysStale = int64(3 * topKeysEvery)
	// topKeysSalt keeps the top keys' ID hash apart from the limiter's.
	topKeysSalt = 0x746f706b657973
	// The lists, in an entry's Refusing field.
	listDenied, listAdmitted = 0, 1
)

func newTopKeysGossip(l *Limiter, c *config) *topKeysGossip {
	g := &topKeysGossip{l: l, clock: realClock{}, peers: map[string]*peerTopKeys{}}
	if clk, ok := c.transport.(transportkit.Clock); ok {
		g.clock = clk
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.link = newGaugeLink(c.transport, wire.NameHash(topKeysSalt, c.limiterID), uint64(g.clock.Now().UnixNano()),
		l.hasher.Fingerprint(), int64(c.interval/2))
	g.link.join(g.clock, l.log, g)
	g.stopTick = g.clock.AfterFunc(topKeysEvery, g.onTick)
	return g
}

func (g *topKeysGossip) now() int64 { return g.l.nanos(g.clock.Now()) }

// onTick sends this node's lists and forgets peers that are gone.
func (g *topKeysGossip) onTick() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	now := g.now()
	members := g.link.readMembers()
	for name, p := range g.peers {
		if now-p.heard > topKeysStale || !slices.Contains(members, name) {
			delete(g.peers, name)
		}
	}
	g.gauges = g.gauges[:0]
	for list, s := range []*summary{&g.l.top.denied, &g.l.top.admitted} {
		for _, k := range heaviest(g.l.top.counts(s, now), TopKeysSent) {
			g.gauges = append(g.gauges, wire.Gauge{Key: k.h, InFlight: int64(min(k.count, uint64(wire.MaxInFlight))),
				Demand: int64(min(k.error, uint64(wire.MaxInFlight))), Refusing: int64(list)})
		}
	}
	if len(g.gauges) > 0 || g.sentAny {
		g.round++
		g.link.send(wire.GaugeFrame{Round: g.round}, g.gauges, true)
		g.sentAny = len(g.gauges) > 0
	}
	g.stopTick = g.clock.AfterFunc(topKeysEvery, g.onTick)
}

// heaviest are the n largest counts, by hash, largest first.
func heaviest(counts map[uint64]KeyCount, n int) []hashedCount {
	all := make([]hashedCount, 0, len(counts))
	for h, k := range counts {
		all = append(all, hashedCount{h, k.Count, k.Error})
	}
	slices.SortFunc(all, func(a, b hashedCount) int {
		if c := cmp.Compare(b.count, a.count); c != 0 {
			return c
		}
		return cmp.Compare(a.h, b.h)
	})
	return all[:min(n, len(all))]
}

// Deliver takes a peer's frame (datagram.Limiter).
func (g *topKeysGossip) Deliver(from string, frame []byte, _ bool) {
	var f wire.GaugeFrame
	if wire.DecodeGauges(frame, &f) != nil {
		g.link.drop()
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.peers[from]
	if f.Leaving {
		if p != nil && f.Incarnation >= p.inc {
			delete(g.peers, from)
		}
		return
	}
	now := g.now()
	switch ok, _ := g.link.isMember(from, now); {
	case g.stopped:
		return
	case !ok, len(f.Gauges) > 0 && f.KeyHashID != g.link.keyHashID:
		// A non-member's, or keys hashed under another secret: their
		// hashes name other keys here.
		g.link.drop()
		return
	case p == nil || f.Incarnation > p.inc:
		p = &peerTopKeys{inc: f.Incarnation}
		g.peers[from] = p
	case f.Incarnation < p.inc || f.Round < p.round:
		return // older than what this node has
	}
	if f.Round > p.round {
		p.round, p.lists = f.Round, [2][]hashedCount{}
	}
	p.heard = now
	for _, e := range f.Gauges {
		list := e.Refusing
		if list != listDenied && list != listAdmitted || len(p.lists[list]) >= TopKeysSent {
			continue // no list of this release, or more than a node sends
		}
		p.lists[list] = append(p.lists[list], hashedCount{e.Key, uint64(e.InFlight), uint64(e.Demand)})
	}
}

// TaggedStream is for the digests of rate limiters: the top keys send
// none (datagram.Limiter).
func (g *topKeysGossip) TaggedStream(string, uint16, int64) (datagram.TaggedStream, bool) {
	return datagram.TaggedStream{}, false
}

// merge sums this node's lists of the window of now with what each peer
// sent last, the n largest of each.
func (g *topKeysGossip) merge(now int64, n int) (denied, admitted []KeyCount) {
	t := g.l.top
	own := [2]map[uint64]KeyCount{t.counts(&t.denied, now), t.counts(&t.admitted, now)}
	g.mu.Lock()
	for _, p := range g.peers {
		if now-p.heard > topKeysStale {
			continue
		}
		for list, entries := range p.lists {
			for _, e := range entries {
				addPeerCount(own[list], e.h, e.count, e.error)
			}
		}
	}
	g.mu.Unlock()
	return sortTop(slices.Collect(maps.Values(own[0])), n), sortTop(slices.Collect(maps.Values(own[1])), n)
}

// stop says goodbye and leaves the hub.
func (g *topKeysGossip) stop() {
	g.mu.Lock()
	g.stopped = true
	if g.stopTick != nil {
		g.stopTick()
	}
	g.link.bye(g.round)
	g.mu.Unlock()
	g.link.leave()
}
