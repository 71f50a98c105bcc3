package gopherpace

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/datagram"
	"github.com/pedreviljoen/gopherpace/core/internal/inflight"
	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// inFlightGossip is a clustered InFlight's part on the wire: every tick
// it reads the members and reports every key this node holds or is asked
// for (wire's gauge frames), flushDelay after a change it reports what
// changed, and it hands the peers' reports to the table. It shares the
// transport's hub with the rate limiters, so their frames share
// datagrams.
type inFlightGossip struct {
	table      *inflight.Table
	f          *InFlight
	t          Transport
	hub        *datagram.Hub
	id         uint64
	inc        uint64
	keyHashID  uint32
	tick       time.Duration
	flushDelay time.Duration
	maxFrame   int
	release    func() // the limiter ID's registration

	sent    datagram.Sent
	dropped atomic.Uint64
	armed   atomic.Bool // a flush is due within flushDelay

	mu       sync.Mutex // everything below, and the sending
	seq      uint64
	stopped  bool
	stopTick func() bool
	members  []string
	// membersRead is when an unknown sender last made this node read the
	// member list again (ns): at most every tick, whatever senders claim.
	membersRead int64
	gauges      []wire.Gauge
	frames      [][]byte
	buf         []byte
}

// inFlightSalt keeps an in-flight limit's ID hash apart from a rate
// limiter's of the same ID.
const inFlightSalt = 0x696e666c69676874

func newInFlightGossip(f *InFlight, c *config, release func()) *inFlightGossip {
	g := &inFlightGossip{
		table: f.table, f: f, t: c.transport, id: wire.NameHash(inFlightSalt, c.limiterID),
		inc: uint64(f.clock.Now().UnixNano()), keyHashID: f.hasher.Fingerprint(),
		tick:       c.interval / 2,
		flushDelay: time.Duration(flushDelayFor(c.interval)),
		maxFrame:   datagram.FrameRoom(c.transport),
		release:    release,
	}
	g.members = c.transport.Members()
	g.membersRead = -int64(g.tick) // a newcomer's first frame may read the list at once
	g.hub = datagram.Join(g.t, g.id, g, int64(g.tick), f.clock, f.log)
	g.mu.Lock()
	g.stopTick = f.clock.AfterFunc(g.tick, g.onTick)
	g.mu.Unlock()
	return g
}

func (g *inFlightGossip) onTick() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	g.members = g.t.Members()
	now := g.f.now()
	g.table.Tick(now, g.members)
	g.sendLocked(true)
	g.stopTick = g.f.clock.AfterFunc(g.tick, g.onTick)
}

// changed arms a flush of what changed, flushDelay from now.
func (g *inFlightGossip) changed() {
	if g.armed.Swap(true) {
		return
	}
	g.f.clock.AfterFunc(g.flushDelay, func() {
		g.armed.Store(false)
		g.flush()
	})
}

func (g *inFlightGossip) flush() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.stopped {
		g.sendLocked(false)
	}
}

// sendLocked reports the table's keys (all of them on a tick) in as many
// frames as they take, at least one on a tick.
func (g *inFlightGossip) sendLocked(all bool) {
	g.gauges = g.table.Report(all, g.gauges[:0])
	if len(g.gauges) == 0 && !all {
		return
	}
	c := g.table.Counts()
	head := wire.GaugeFrame{Limiter: g.id, Incarnation: g.inc, Round: g.table.Round(), Acquired: c.Acquired, Attempts: c.Attempts, KeyHashID: g.keyHashID}
	per := max(1, (g.maxFrame-wire.HeaderMax)/wire.GaugeEntryMax)
	g.frames, g.buf = g.frames[:0], g.buf[:0]
	for rest := g.gauges; ; {
		n := min(per, len(rest))
		g.seq++
		head.Seq = g.seq
		start := len(g.buf)
		g.buf = wire.AppendGaugeHeader(g.buf, &head, n)
		for _, e := range rest[:n] {
			g.buf = wire.AppendGauge(g.buf, e)
		}
		g.frames = append(g.frames, g.buf[start:])
		if rest = rest[n:]; len(rest) == 0 {
			break
		}
	}
	if !all {
		for _, fr := range g.frames {
			g.hub.Send(&g.sent, fr, false)
		}
		return
	}
	g.hub.SendAll(&g.sent, g.frames)
}

// Deliver takes a peer's frame (datagram.Limiter).
func (g *inFlightGossip) Deliver(from string, frame []byte, _ bool) {
	var f wire.GaugeFrame
	if wire.DecodeGauges(frame, &f) != nil || !g.isMember(from) && !g.table.Knows(from) {
		g.dropped.Add(1)
		return
	}
	keyed := f.KeyHashID == g.keyHashID || len(f.Gauges) == 0
	if !keyed {
		g.dropped.Add(1) // its keyless count is still used
	}
	g.table.Apply(from, &f, keyed)
}

// isMember reports whether from is a member, reading the list again (at
// most every tick) for a sender not yet in it: a newcomer is heard before
// this node's next tick reads it.
func (g *inFlightGossip) isMember(from string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if slices.Contains(g.members, from) {
		return true
	}
	now := g.f.now()
	if now-g.membersRead < int64(g.tick) {
		return false
	}
	g.membersRead = now
	g.members = g.t.Members()
	g.table.SetNodes(1 + len(g.members))
	return slices.Contains(g.members, from)
}

// TaggedStream is for the digests of rate limiters: an in-flight limit
// sends none (datagram.Limiter).
func (g *inFlightGossip) TaggedStream(string, uint16, int64) (datagram.TaggedStream, bool) {
	return datagram.TaggedStream{}, false
}

// stop says goodbye, leaves the hub and makes the table a node's alone.
func (g *inFlightGossip) stop() {
	g.mu.Lock()
	g.stopped = true
	if g.stopTick != nil {
		g.stopTick()
	}
	g.seq++
	bye := wire.AppendGaugeHeader(nil, &wire.GaugeFrame{Leaving: true, Limiter: g.id, Incarnation: g.inc, Seq: g.seq, Round: g.table.Round()}, 0)
	g.hub.Send(&g.sent, bye, true)
	g.mu.Unlock()
	g.hub.Leave(g.id)
	g.release()
	g.table.Alone()
}
