package gopherpace

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/cluster"
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
	flushDelay time.Duration
	tick       time.Duration
	release    func()      // the limiter ID's registration
	armed      atomic.Bool // a flush is due within flushDelay

	mu       sync.Mutex // everything below, and the link's sending and members
	link     *gaugeLink
	stopped  bool
	stopTick func() bool
	gauges   []wire.Gauge
}

// inFlightSalt keeps an in-flight limit's ID hash apart from a rate
// limiter's of the same ID.
const inFlightSalt = 0x696e666c69676874

func newInFlightGossip(f *InFlight, c *config, release func()) *inFlightGossip {
	g := &inFlightGossip{
		table: f.table, f: f, tick: c.interval / 2,
		flushDelay: time.Duration(cluster.FlushDelayFor(c.interval)),
		release:    release,
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.link = newGaugeLink(c.transport, wire.NameHash(inFlightSalt, c.limiterID), uint64(f.clock.Now().UnixNano()),
		f.hasher.Fingerprint(), int64(g.tick))
	g.link.join(f.clock, f.log, g)
	g.stopTick = f.clock.AfterFunc(g.tick, g.onTick)
	return g
}

func (g *inFlightGossip) onTick() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	g.table.Tick(g.f.now(), g.link.readMembers())
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
	c := g.table.Counts()
	g.link.send(wire.GaugeFrame{Round: g.table.Round(), Acquired: c.Acquired, Attempts: c.Attempts}, g.gauges, all)
}

// Deliver takes a peer's frame (datagram.Limiter).
func (g *inFlightGossip) Deliver(from string, frame []byte, _ bool) {
	var f wire.GaugeFrame
	if wire.DecodeGauges(frame, &f) != nil || !g.isMember(from) && !g.table.Knows(from) {
		g.link.drop()
		return
	}
	keyed := f.KeyHashID == g.link.keyHashID || len(f.Gauges) == 0
	if !keyed {
		g.link.drop() // its keyless count is still used
	}
	g.table.Apply(from, &f, keyed)
}

// isMember reports whether from is a member (gaugeLink.isMember); a
// reading of the members tells the table how many nodes there are.
func (g *inFlightGossip) isMember(from string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	ok, reread := g.link.isMember(from, g.f.now())
	if reread {
		g.table.SetNodes(1 + len(g.link.members))
	}
	return ok
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
	g.link.bye(g.table.Round())
	g.mu.Unlock()
	g.link.leave()
	g.release()
	g.table.Alone()
}
