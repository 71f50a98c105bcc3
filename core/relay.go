package gopherpace

import (
	"encoding/binary"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// relays is a hub's part in the groups (groups.go): the group view, and
// the envelopes waiting for the hub's next datagrams: its group's frames
// for the groups this node covers, and other groups' frames for its
// mates. It belongs to its hub and is under the hub's lock.
type relays struct {
	view   groupView
	listed int   // members the transport listed at the last refresh
	viewAt int64 // when the view was made, ns since the hub began

	toGroups []byte // envelopes of this group's frames, for the covered groups
	toMates  []byte // envelopes from other groups, for this node's mates
	// latest are the latest frames of running totals of this group's
	// origins, by stream, waiting to go to other groups (dueLatest).
	latest   []latestFrame
	latestAt map[relayStream]int
	turn     uint64
	scratch  wire.Frame
	batch    []byte
	// names holds each member's name, by itself: an envelope's origin
	// finds its string here instead of being copied into a new one.
	names map[string]string
	// heard is when each member's frames last arrived, a mate's from it,
	// another's through relays: a mate silent for longer than mateSilence
	// covers no group (groupView.cover), and a member of another group
	// silent for longer than relaySlack is no relay target.
	heard map[string]int64
}

// mateSilence is how long a mate may go unheard and still pass its
// group's frames on: three ticks, as the engines' isolation timeout.
func mateSilence(tick int64) int64 { return 3 * tick }

// heardFrom notes a frame of name's, from it or relayed.
func (r *relays) heardFrom(name string, now int64) {
	if r.heard == nil {
		r.heard = make(map[string]int64)
	}
	r.heard[name] = now
}

// redeal deals the groups again among the mates heard lately.
func (r *relays) redeal(self string, now, tick int64) {
	if !r.view.grouped() {
		return
	}
	r.view.cover(self, func(m string) bool { return r.heardWithin(m, now, mateSilence(tick)) })
}

// heardWithin reports whether name was heard within d of now.
func (r *relays) heardWithin(name string, now, d int64) bool {
	at, ok := r.heard[name]
	return ok && now-at <= d
}

type relayStream struct {
	origin  string
	limiter uint64
}

const (
	// viewEvery is how often the group view is made again from the
	// transport's member list.
	viewEvery = int64(100 * time.Millisecond)
	// relayBacklog bounds each buffer of envelopes: beyond it, frames
	// meant for relaying are dropped (and counted), so a flood of
	// envelopes costs memory only up to it.
	relayBacklog = 64 << 10
)

// quietEvery is how often one origin's frames of running totals go to
// other groups, for limiters that tick every tick: four ticks. The peers
// heard through relays are given relaySlack longer before their silence
// counts.
func quietEvery(tick int64) int64 { return 4 * tick }

// relayDelay is how long envelopes wait at a relay for a datagram of the
// node's own to ride with: half a tick. Shorter, the spreading inside a
// group costs more datagrams (at N = 300, a fifth of a tick took 1,052
// datagrams a second per node, half a tick 649); longer, the other
// groups hear of admits later, and the cluster overshoots more as a
// flash crowd starts (a whole tick: +115 over R·w + B in the worst
// second, half a tick +67, against +16 with every frame to every peer).
func relayDelay(tick int64) int64 { return tick / 2 }

// relaySlack is how much later than a peer of its own group a node may
// hear a peer of another group: a frame of running totals waits up to
// quietEvery to be passed on, and each of its two relays up to a tick.
func relaySlack(tick int64) int64 { return quietEvery(tick) + 2*tick }

// refresh reads the transport's member list again when the last read is
// older than viewEvery, and makes the group view from it (and from the
// members' zones, if the transport is a Zoner) when groups is set (the
// transport can send to one member).
func (r *relays) refresh(t Transport, self string, now int64, groups bool) {
	if r.viewAt != 0 && now-r.viewAt < viewEvery {
		return
	}
	r.viewAt = now
	members := t.Members()
	r.listed = len(members)
	if groups {
		clear(r.names)
		if r.names == nil {
			r.names = make(map[string]string, len(members))
		}
		for _, m := range members {
			r.names[m] = m
		}
	}
	if groups {
		var zone func(string) string
		if z, ok := t.(Zoner); ok {
			zone = z.Zone
		}
		r.view = newGroupView(self, members, zone)
	}
	if !r.view.grouped() {
		r.toGroups, r.toMates, r.latest, r.latestAt = r.toGroups[:0], r.toMates[:0], nil, nil
		return
	}
	for m := range r.heard {
		if _, ok := r.view.group[m]; !ok {
			delete(r.heard, m)
		}
	}
	// Forget the streams of nodes no longer in this group.
	kept := r.latest[:0]
	for _, h := range r.latest {
		if h.stream.origin == self || r.view.isMate(h.stream.origin) {
			kept = append(kept, h)
		}
	}
	if len(kept) != len(r.latest) {
		clear(r.latest[len(kept):])
		r.latest = kept
		clear(r.latestAt)
		for i, h := range r.latest {
			r.latestAt[h.stream] = i
		}
	}
}

// forGroups takes the frames of b (a datagram; its envelopes are
// skipped), sent by origin of this node's group, for the groups this node
// covers. A
// frame with keyed counts (deltas) or a flag goes at once; a frame of
// running totals only (a report of global admits, a heartbeat) replaces
// the origin's last one still waiting, and goes at most every quiet
// (dueLatest): its totals include every earlier frame's. It reports how many
// frames it queued, and how many it dropped for want of room.
func (r *relays) forGroups(origin string, b []byte, now int64, maxDatagram int) (queued, dropped uint64) {
	if len(r.view.covered) == 0 {
		return 0, 0
	}
	batch, n := r.batch[:0], uint64(0)
	for len(b) > 0 {
		frame, rest, err := wire.Next(b)
		if err != nil {
			break
		}
		b = rest
		if wire.IsRelay(frame) {
			continue // another group's, passed on to the mates apart
		}
		f := &r.scratch
		if wire.Decode(frame, f) != nil {
			continue // the engines dropped it too
		}
		if f.Global == 0 && f.Seq == 0 && !f.Leaving && !f.Idle && !f.Partial {
			r.keepLatest(relayStream{origin, f.Limiter}, frame)
			continue
		}
		if f.Seq == 0 {
			r.forgetLatest(relayStream{origin, f.Limiter}) // this frame's totals include the waiting one's
		}
		if wire.RelaySize(origin, len(batch)+len(frame)) > maxDatagram {
			q, d := r.emit(origin, batch, n)
			queued, dropped, batch, n = queued+q, dropped+d, batch[:0], 0
		}
		batch, n = append(batch, frame...), n+1
	}
	q, d := r.emit(origin, batch, n)
	r.batch = batch[:0]
	return queued + q, dropped + d
}

// emit queues n frames of origin's in one envelope for other groups.
func (r *relays) emit(origin string, frames []byte, n uint64) (queued, dropped uint64) {
	if n == 0 {
		return 0, 0
	}
	if len(r.toGroups)+wire.RelaySize(origin, len(frames)) > relayBacklog {
		return 0, n
	}
	r.toGroups = wire.AppendRelay(r.toGroups, origin, false, frames)
	return n, 0
}

// latestFrame is the latest frame of running totals of one origin's
// limiter, waiting for its turn to go to other groups.
type latestFrame struct {
	stream   relayStream
	frame    []byte // empty: none waiting
	lastSent int64  // when the stream's last frame went
	sent     bool
}

// keepLatest keeps frame as s's latest frame of running totals.
func (r *relays) keepLatest(s relayStream, frame []byte) {
	i, ok := r.latestAt[s]
	if !ok {
		if r.latestAt == nil {
			r.latestAt = make(map[relayStream]int)
		}
		i = len(r.latest)
		r.latestAt[s] = i
		r.latest = append(r.latest, latestFrame{stream: s})
	}
	h := &r.latest[i]
	h.frame = append(h.frame[:0], frame...)
}

// forgetLatest forgets s's waiting frame, if any: a later frame of s went at once.
func (r *relays) forgetLatest(s relayStream) {
	if i, ok := r.latestAt[s]; ok {
		r.latest[i].frame = r.latest[i].frame[:0]
	}
}

// dueLatest queues, for other groups, every waiting latest frame whose
// stream's last went at least quiet ago, in the order the streams were
// first kept (so that simulations repeat). It reports how many of other nodes'
// it queued, how many it dropped, and whether frames still wait.
func (r *relays) dueLatest(self string, now, quiet int64) (queued, dropped uint64, waiting bool) {
	for i := range r.latest {
		h := &r.latest[i]
		if len(h.frame) == 0 {
			continue
		}
		if h.sent && now-h.lastSent < quiet {
			waiting = true
			continue
		}
		q, d := r.emit(h.stream.origin, h.frame, 1)
		if h.stream.origin == self {
			q = 0 // this node's own: not relayed
		}
		queued, dropped = queued+q, dropped+d
		h.frame, h.lastSent, h.sent = h.frame[:0], now, true
	}
	return queued, dropped, waiting
}

// forMates queues an envelope from another group for this node's mates,
// as the last hop. It reports whether there was room.
func (r *relays) forMates(origin []byte, frames []byte) bool {
	if len(r.view.mates) == 0 {
		return true // no one to spread it to
	}
	if len(r.toMates)+wire.RelaySize(string(origin), len(frames)) > relayBacklog {
		return false
	}
	r.toMates = wire.AppendRelay(r.toMates, string(origin), true, frames)
	return true
}

// pending reports whether envelopes wait to be sent.
func (r *relays) pending() bool { return len(r.toGroups) > 0 || len(r.toMates) > 0 }

// latestWaiting reports whether frames wait for their turn (dueLatest).
func (r *relays) latestWaiting() bool {
	for i := range r.latest {
		if len(r.latest[i].frame) > 0 {
			return true
		}
	}
	return false
}

// sent empties the buffers once their envelopes have gone.
func (r *relays) sent() { r.toGroups, r.toMates = r.toGroups[:0], r.toMates[:0] }

// frameLimiter is the limiter a frame names (Next has checked its size).
func frameLimiter(frame []byte) uint64 { return binary.LittleEndian.Uint64(frame[4:12]) }
