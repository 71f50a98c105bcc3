package gopherpace

import (
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/pedreviljoen/gopherpace/core/internal/datagram"
	"github.com/pedreviljoen/gopherpace/core/internal/wire"
	"github.com/pedreviljoen/gopherpace/core/transportkit"
)

// A gaugeLink is one part's end of the gauge frames it sends and hears
// over its transport's hub (wire's gauge frames: levels, which a newer
// frame replaces): its ID and incarnation, the frames cut to the
// transport's size, the goodbye, and who may be heard. An in-flight limit
// and the top keys report this way. It has no lock of its own: its owner
// calls it under the owner's lock, but for the counters.
type gaugeLink struct {
	t         Transport
	hub       *datagram.Hub
	id, inc   uint64
	keyHashID uint32
	maxFrame  int
	tick      int64 // ns: the least time between two readings of the members for unknown senders

	sent    datagram.Sent
	dropped atomic.Uint64 // frames heard and not used

	seq    uint64
	frames [][]byte
	buf    []byte
	// members are the transport's, as last read; membersRead is when an
	// unknown sender last made this node read them again (ns).
	members     []string
	membersRead int64
}

// newGaugeLink is the link of the part named id on t; join starts it.
func newGaugeLink(t Transport, id, inc uint64, keyHashID uint32, tick int64) *gaugeLink {
	return &gaugeLink{t: t, id: id, inc: inc, keyHashID: keyHashID, maxFrame: datagram.FrameRoom(t), tick: tick,
		members: t.Members(), membersRead: -tick} // a newcomer's first frame may read the list at once
}

// join joins the transport's hub for part, which hears its frames from
// now on (datagram.Limiter): the owner keeps the link before it joins.
func (k *gaugeLink) join(clock transportkit.Clock, log *slog.Logger, part datagram.Limiter) {
	k.hub = datagram.Join(k.t, k.id, part, k.tick, clock, log)
}

// send sends entries under head (its Limiter, Incarnation, Seq and
// KeyHashID are the link's) in as many frames as they take: on their own
// when all is false, else packed with the hub's other parts' frames in
// one turn, at least one frame even with no entries.
func (k *gaugeLink) send(head wire.GaugeFrame, entries []wire.Gauge, all bool) {
	if len(entries) == 0 && !all {
		return
	}
	head.Limiter, head.Incarnation, head.KeyHashID = k.id, k.inc, k.keyHashID
	per := max(1, (k.maxFrame-wire.HeaderMax)/wire.GaugeEntryMax)
	k.frames, k.buf = k.frames[:0], k.buf[:0]
	for rest := entries; ; {
		n := min(per, len(rest))
		k.seq++
		head.Seq = k.seq
		start := len(k.buf)
		k.buf = wire.AppendGaugeHeader(k.buf, &head, n)
		for _, e := range rest[:n] {
			k.buf = wire.AppendGauge(k.buf, e)
		}
		k.frames = append(k.frames, k.buf[start:])
		if rest = rest[n:]; len(rest) == 0 {
			break
		}
	}
	if !all {
		for _, fr := range k.frames {
			k.hub.Send(&k.sent, fr, false)
		}
		return
	}
	k.hub.SendAll(&k.sent, k.frames)
}

// bye tells the peers this node's part has gone, at once.
func (k *gaugeLink) bye(round uint64) {
	k.seq++
	frame := wire.AppendGaugeHeader(nil, &wire.GaugeFrame{Leaving: true, Limiter: k.id, Incarnation: k.inc, Seq: k.seq, Round: round}, 0)
	k.hub.Send(&k.sent, frame, true)
}

// leave leaves the hub: nothing more is heard. Call it without the
// owner's lock, which a frame being delivered may be waiting for.
func (k *gaugeLink) leave() { k.hub.Leave(k.id) }

// drop counts a frame heard and not used.
func (k *gaugeLink) drop() { k.dropped.Add(1) }

// readMembers reads the transport's members again.
func (k *gaugeLink) readMembers() []string {
	k.members = k.t.Members()
	return k.members
}

// isMember reports whether from is a member at now (ns), reading the
// list again for a sender not in it, at most every tick: a newcomer is
// heard before the owner's next tick reads it. reread says it was read.
func (k *gaugeLink) isMember(from string, now int64) (ok, reread bool) {
	if slices.Contains(k.members, from) {
		return true, false
	}
	if now-k.membersRead < k.tick {
		return false, false
	}
	k.membersRead = now
	return slices.Contains(k.readMembers(), from), true
}
