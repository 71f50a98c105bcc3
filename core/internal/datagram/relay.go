package datagram

import (
	"encoding/binary"
	"slices"
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
	// viewMembers and viewZones are what the view was made of; zonesNow
	// is scratch for the members' zones at a refresh.
	viewMembers, viewZones, zonesNow []string
	viewMade                         bool
	coveredWas                       []int // the covered groups before a redeal

	toGroups []byte     // envelopes of this group's frames, for the covered groups
	toMates  []byte     // envelopes from other groups, for this node's mates
	own      ownEntries // this node's running totals, for its mates
	// latest are the latest running totals of this group's origins, by
	// stream, waiting to go to other groups in digests (dueLatest).
	latest   []latestEntry
	latestAt map[relayStream]int
	turn     uint64
	// wholeUntil is when entries may go tagged again after a change of
	// the members or the groups covered (wholeAgain).
	wholeUntil int64
	scratch    wire.Frame
	batch      []byte
	digest     []byte // entries of one limiter, for the next digest
	// names holds each member's name, by itself: an envelope's origin
	// finds its string here instead of being copied into a new one.
	names map[string]string
	// byHash finds a member's name by its hash, a digest entry's origin
	// ("" for a hash two members share).
	byHash map[uint64]string
	// heard is when each member's frames last arrived, a mate's from it,
	// another's through relays: a mate silent for longer than mateSilence
	// covers no group (groupView.cover), and a member of another group
	// silent for longer than RelaySlack is no relay target.
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
	r.coveredWas = append(r.coveredWas[:0], r.view.covered...)
	r.view.cover(self, func(m string) bool { return r.heardWithin(m, now, mateSilence(tick)) })
	if !slices.Equal(r.coveredWas, r.view.covered) {
		// Groups this node did not cover have not heard its entries
		// whole.
		r.wholeAgain(now)
	}
}

// wholeAgain sends every stream's entries whole for wholeSettle from
// now.
func (r *relays) wholeAgain(now int64) {
	for i := range r.latest {
		r.latest[i].wholeSent = false
	}
	r.wholeUntil = now + wholeSettle()
}

// targets appends to dst the members of the covered groups to send this
// group's envelopes to, heard lately; each call takes the next in turn.
func (r *relays) targets(dst []string, now, tick int64) []string {
	dst = r.view.relayTargets(dst, r.turn, func(m string) bool {
		return r.heardWithin(m, now, RelaySlack(tick)+mateSilence(tick))
	})
	r.turn++
	return dst
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
// other groups, for limiters that tick every tick: eight ticks. At four,
// these heartbeats were a third of a node's bytes at N = 300 and half at
// 1,000. The peers heard through relays are given RelaySlack longer
// before their silence counts.
func quietEvery(tick int64) int64 { return 8 * tick }

// wholeEvery is how often a relay sends each stream's entry whole, its
// incarnation and totals in full, for receivers that have not heard it
// or lost track of it (one that lost the whole entries after a change,
// or missed the stream for over TotalsHorizon); between, entries go
// tagged and their totals truncated, 6 to 12 bytes shorter. Four quiet
// periods, but at most 4 s (and at least one quiet period): a newcomer
// is served by wholeAgain, so this is the repair of last resort. At one
// quiet period, every relayed heartbeat went whole, a fifth of a node's
// bytes at N = 1,000; at six, 79.6 KB/s a node at N = 1,000 against 81.0,
// but a newcomer of the churn scenario reached 1.11 of the cluster's
// ratio.
func wholeEvery(quiet int64) int64 { return max(quiet, min(4*quiet, int64(4*time.Second))) }

// wholeSettle is how long after a change of the members or the groups
// covered a relay sends every entry whole, and how long it sends a new
// stream's whole: three member-list reads (viewEvery), long enough for
// the members of the groups it covers to read the change too, so that a
// newcomer is already a mate of the member that spreads the entries.
// (Sending whole only at the change, and every quiet period after, a
// newcomer of the churn scenario that missed the first heard other
// groups late enough to admit 11% over the cluster's ratio at twice
// quiet.)
func wholeSettle() int64 { return 3 * viewEvery }

// relayDelay is how long envelopes wait at a relay with mates mates for
// a datagram of the node's own to ride with. In a small group, half a
// tick: shorter, the spreading inside a group costs more datagrams (at N
// = 300, a fifth of a tick took 1,052 datagrams a second per node, half a
// tick 649); longer, the other groups hear of admits later (a whole tick,
// before shares were sliced: +115 over R·w + B in the worst second as a
// flash crowd started, half a tick +67). From ridingMates mates, the next
// tick's datagram: a datagram between ticks costs one per mate, and at N =
// 1,000 those sent for relayed frames alone were a third of a node's
// 1,035 a second; riding the tick, it sent 682 (docs/design.md#groups).
// The timer then fires a quarter tick after the next tick is due, for a
// node whose tick sends nothing. (Riding the tick in every group cost the
// N = 100 rows accuracy: −1.25% cut in halves, against −0.79%.)
func relayDelay(tick int64, mates int) int64 {
	if mates >= ridingMates {
		return tick + tick/4
	}
	return tick / 2
}

// ridingMates is the group size from which relays ride the tick: about
// N = 500 without zones.
const ridingMates = 20

// RelaySlack is how much later than a peer of its own group a node may
// hear a peer of another group: a frame of running totals waits up to
// quietEvery to be passed on, and each of its two relays up to a tick
// (relayDelay: in a large group, for the relay's next tick).
func RelaySlack(tick int64) int64 { return quietEvery(tick) + 2*tick }

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
	if groups && r.membersChanged(t, members) {
		// A member new to this node may be new to the cluster, and has
		// heard no incarnation whole yet.
		r.wholeAgain(now)
		clear(r.names)
		clear(r.byHash)
		if r.names == nil {
			r.names = make(map[string]string, len(members))
			r.byHash = make(map[uint64]string, len(members))
		}
		for _, m := range members {
			r.names[m] = m
			// Two names of one hash name no one: their entries are
			// dropped rather than taken as the wrong member's.
			h := wire.OriginHash(m)
			if prev, ok := r.byHash[h]; ok && prev != m {
				m = ""
			}
			r.byHash[h] = m
		}
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

// membersChanged reports whether members (and their zones, if t tells
// them) differ from those the view was last made of, and notes them: at
// N = 1,000 a view takes about 100 KB to build, ten times a second, for a
// member list that rarely changes.
func (r *relays) membersChanged(t Transport, members []string) bool {
	z, zoned := t.(Zoner)
	r.zonesNow = r.zonesNow[:0]
	if zoned {
		for _, m := range members {
			r.zonesNow = append(r.zonesNow, z.Zone(m))
		}
	}
	if r.viewMade && slices.Equal(members, r.viewMembers) && slices.Equal(r.zonesNow, r.viewZones) {
		return false
	}
	r.viewMade = true
	r.viewMembers = append(r.viewMembers[:0], members...)
	r.viewZones = append(r.viewZones[:0], r.zonesNow...)
	return true
}

// forGroups takes the frames of b (a datagram; its envelopes and
// digests are skipped), sent by origin of this node's group, for the
// groups this node covers. A frame with keyed counts (deltas) goes at
// once, whole, in an envelope. A frame without (running totals: a report
// of global admits, a heartbeat) becomes the origin's latest entry for a
// digest, replacing the one still waiting: its totals include every
// earlier frame's. An in-flight limit's gauge frame goes whole. An entry with admits or a flag goes with the next
// datagram, one of running totals alone at most every quiet (dueLatest).
// It reports how many frames it queued in envelopes, and how many it
// dropped for want of room.
func (r *relays) forGroups(origin string, b []byte, now, tick int64, maxDatagram int) (queued, dropped uint64) {
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
		if !wire.IsGauges(frame) { // an in-flight limit's levels go whole
			f := &r.scratch
			if wire.Decode(frame, f) != nil {
				continue // the engines dropped it too
			}
			if f.Seq == 0 {
				r.keepLatest(relayStream{origin, f.Limiter}, f, now, tick)
				continue
			}
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

// latestEntry is the latest running totals of one origin's limiter,
// waiting for their turn to go to other groups.
type latestEntry struct {
	stream   relayStream
	hash     uint64     // the origin's, for the digest
	frame    wire.Frame // without keyed counts
	waiting  bool
	urgent   bool  // admits or a flag: with the next datagram
	lastSent int64 // when the stream's last entry went
	sent     bool
	// wholeAt is when an entry of the frame's incarnation last went whole
	// (untagged), if wholeSent: the others go tagged (dueLatest).
	wholeAt   int64
	wholeSent bool
	// since is when this relay first kept an entry of the incarnation.
	since int64
	// marks are the incarnation's running totals as this relay kept them,
	// at least totalsEvery apart, the older first: a tagged entry's totals
	// go truncated to a width that covers twice their growth since
	// marks[0] (truncate).
	marks [2]totalsMark
}

// totalsMark is a stream's running totals at a moment.
type totalsMark struct {
	global, demand uint64
	at             int64
	set            bool
}

// TotalsHorizon is how recently a receiver must have heard a stream for a
// truncated total of it to be widened from its last one
// (hub.receiveDigest): twice RelaySlack, the longest a peer of another
// group may go unheard and still count as heard, so that a heartbeat
// that comes late, or after one lost, is still widened (at RelaySlack,
// receivers dropped enough of them at N = 300 for a node to count peers
// as gone and admit 0.89 of the cluster's ratio). A total that reaches
// the receiver is itself up to RelaySlack old, so the receiver's last
// total is at most two horizons older than the entry's.
func TotalsHorizon(tick int64) int64 { return 2 * RelaySlack(tick) }

// totalsEvery is how far apart a relay keeps a stream's marks: two
// horizons, so that marks[0] is at least as old as any total a receiver
// may widen from.
func totalsEvery(tick int64) int64 { return 2 * TotalsHorizon(tick) }

// mark notes the totals of f as a mark when the newer mark is at least
// totalsEvery old.
func (h *latestEntry) mark(f *wire.Frame, now, tick int64) {
	if !h.marks[1].set || now-h.marks[1].at >= totalsEvery(tick) {
		h.marks[0], h.marks[1] = h.marks[1], totalsMark{global: f.GlobalSum, demand: f.DemandSum, at: now, set: true}
	}
}

// truncate sets e's widths for the entry's totals: twice their growth
// since marks[0], when the relay has kept the stream that long, and only
// where truncating saves bytes (wire.TotalBits). Twice, for a stream that
// speeds up between marks.
func (h *latestEntry) truncate(e *wire.Entry) {
	if !h.marks[0].set {
		return
	}
	growth := func(now, then uint64) uint64 {
		if now < then {
			return 0
		}
		return min(now-then, wire.MaxTokens)
	}
	e.GlobalBits = wire.TotalBits(h.frame.GlobalSum, 2*growth(h.frame.GlobalSum, h.marks[0].global))
	e.DemandBits = wire.TotalBits(h.frame.DemandSum, 2*growth(h.frame.DemandSum, h.marks[0].demand))
}

// follow takes f as the stream's latest frame: a new incarnation starts
// over, not yet sent whole and without marks.
func (h *latestEntry) follow(f *wire.Frame, now, tick int64) {
	if h.frame.Incarnation != f.Incarnation {
		h.wholeSent, h.since, h.marks = false, now, [2]totalsMark{}
	}
	h.mark(f, now, tick)
	h.frame = *f
}

// entry is the digest entry for the stream's latest frame at now: whole
// while the stream settles (wholeSettle after it starts, or until
// wholeUntil after a change) and at least every wholeEvery(quiet), else
// tagged with its totals truncated.
func (h *latestEntry) entry(now, quiet, wholeUntil int64) wire.Entry {
	tagged := h.wholeSent && now-h.wholeAt < wholeEvery(quiet) && now-h.since >= wholeSettle() && now >= wholeUntil
	if !tagged {
		h.wholeSent, h.wholeAt = true, now
	}
	e := wire.Entry{Origin: h.hash, Tagged: tagged, Tag: wire.IncarnationTag(h.frame.Incarnation)}
	if tagged {
		h.truncate(&e)
	}
	return e
}

// keepLatest keeps f's running totals as s's latest entry. Admits of an
// entry still waiting add to the new one's: a receiver that resyncs
// charges an entry's admits since the entry before it went.
func (r *relays) keepLatest(s relayStream, f *wire.Frame, now, tick int64) {
	i, ok := r.latestAt[s]
	if !ok {
		if r.latestAt == nil {
			r.latestAt = make(map[relayStream]int)
		}
		i = len(r.latest)
		r.latestAt[s] = i
		r.latest = append(r.latest, latestEntry{stream: s, hash: wire.OriginHash(s.origin)})
	}
	h := &r.latest[i]
	global := f.Global
	if h.waiting && h.frame.Incarnation == f.Incarnation {
		global = min(global+h.frame.Global, int64(f.GlobalSum))
	} else {
		h.urgent = false
	}
	h.follow(f, now, tick)
	h.frame.Keys, h.frame.Seq, h.frame.Global = nil, 0, global
	h.urgent = h.urgent || f.Global > 0 || f.Leaving || f.Idle || f.Partial
	h.waiting = true
}

// dueLatest queues, for other groups, a digest of the waiting entries of
// each limiter that are due (with admits or a flag, or of a stream whose
// last entry went at least quiet ago), in the order the streams were
// first kept (so that simulations repeat). It reports how many entries of
// other nodes' it queued, how many it dropped, and whether entries still
// wait.
func (r *relays) dueLatest(self string, now, quiet int64, maxDatagram int) (queued, dropped uint64, waiting bool) {
	for first := range r.latest {
		limiter := r.latest[first].stream.limiter
		if first > 0 && r.limiterSeen(first, limiter) {
			continue // went with the first stream of its limiter
		}
		entries, others := r.digest[:0], uint64(0)
		flush := func() {
			if len(entries) == 0 {
				return
			}
			if len(r.toGroups)+wire.DigestSize(len(entries)) > relayBacklog {
				dropped += others
			} else {
				r.toGroups = wire.AppendDigest(r.toGroups, false, limiter, entries)
				queued += others
			}
			entries, others = entries[:0], 0
		}
		for i := first; i < len(r.latest); i++ {
			h := &r.latest[i]
			if h.stream.limiter != limiter || !h.waiting {
				continue
			}
			if !h.urgent && h.sent && now-h.lastSent < quiet {
				waiting = true
				continue
			}
			if wire.DigestSize(len(entries)+wire.DigestEntryMax) > maxDatagram {
				flush()
			}
			entries = wire.AppendDigestEntry(entries, h.entry(now, quiet, r.wholeUntil), &h.frame)
			if h.stream.origin != self {
				others++ // this node's own are not relayed
			}
			h.waiting, h.urgent, h.lastSent, h.sent = false, false, now, true
		}
		flush()
		r.digest = entries[:0]
	}
	return queued, dropped, waiting
}

// limiterSeen reports whether a stream before i is of limiter.
func (r *relays) limiterSeen(i int, limiter uint64) bool {
	for _, h := range r.latest[:i] {
		if h.stream.limiter == limiter {
			return true
		}
	}
	return false
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

// latestWaiting reports whether entries wait for their turn (dueLatest).
func (r *relays) latestWaiting() bool {
	for i := range r.latest {
		if r.latest[i].waiting {
			return true
		}
	}
	return false
}

// digestForMates queues a digest from another group for this node's
// mates, as the last hop. It reports whether there was room.
func (r *relays) digestForMates(d []byte) bool {
	if len(r.view.mates) == 0 {
		return true
	}
	if len(r.toMates)+len(d) > relayBacklog {
		return false
	}
	r.toMates = wire.Spread(r.toMates, d)
	return true
}

// sent empties the buffers once their envelopes have gone.
func (r *relays) sent() { r.toGroups, r.toMates = r.toGroups[:0], r.toMates[:0] }

// frameLimiter is the limiter a frame names (Next has checked its size).
func frameLimiter(frame []byte) uint64 { return binary.LittleEndian.Uint64(frame[4:12]) }
