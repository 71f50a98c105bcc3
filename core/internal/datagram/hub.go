// Package datagram is the layer between a cluster's limiters and their
// transport: a Hub per transport in the process packs the frames of every
// limiter on it into datagrams and hands each arriving frame to the
// limiter it names; in a cluster of GroupsFrom nodes or more it sends to
// the node's group only and relays frames between groups (groups.go,
// relay.go), with running totals passed on as digest entries
// (own_entries.go). It knows frames only by their wire format (package
// wire), and limiters only by the Limiter interface.
package datagram

import (
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
	"github.com/pedreviljoen/gopherpace/core/transportkit"
)

// A Hub is a transport's one subscriber in this process, shared by every
// limiter on that transport. It hands each arriving frame to the limiter
// the frame names, and packs the frames its limiters send within
// bundleDelay of one another into one datagram per peer (wire.Next splits
// them again): limiters that share a transport tick together (internal/cluster's engine.go),
// so five limiters cost one datagram per peer per tick, not five.
//
// Frames a limiter must send at once (an early flush, a goodbye) go out at
// once, taking whatever is pending along. In a cluster of GroupsFrom
// nodes or more, over a transport that can send to one member, a datagram
// goes to the members of this node's group only, and the hub relays
// frames between groups (groups.go, relay.go). The hub's counters are atomic;
// its other fields are under its own lock, which is never held while a
// limiter's engine is called (an engine holds its lock while it sends, so
// the order is always engine, then hub).
type Hub struct {
	t        Transport
	uni      Unicaster // the transport, when it can send to one member: groups are possible
	name     string    // this node's
	clock    transportkit.Clock
	maxFrame int // the transport's: the largest datagram
	log      *slog.Logger

	mu          sync.Mutex
	limiters    map[uint64]Limiter // by limiter ID hash (wire.NameHash)
	unsubscribe func()
	pending     []byte         // frames waiting for the next datagram
	senders     []pendingFrame // whose they are, to count them sent or refused
	stopTimer   func() bool    // the bundling timer
	stopRelay   func() bool    // the envelopes' timer
	// lastVersionWarn and lastSendWarn are when each WARN was last logged
	// (ns since the hub began).
	lastVersionWarn, lastSendWarn int64
	began                         time.Time
	// tick is the shortest tick of the hub's limiters, which paces the
	// relays (relayDelay, quietEvery).
	tick int64
	// rel is the hub's part in the groups of a large cluster (relay.go).
	rel     relays
	targets []string // scratch: this flush's relay targets
	dgram   []byte   // scratch: a datagram being built

	stats hubStats
}

// pendingFrame is one frame of the next datagram: n bytes of s's.
type pendingFrame struct {
	s *Sent
	n int
}

type hubStats struct {
	datagramsSent, sendFailures        atomic.Uint64
	malformed, otherLimiter, ofVersion atomic.Uint64
	// Each datagram counted once per peer it went to, and its bytes.
	peerDatagrams, peerBytes atomic.Uint64
	// Frames of others passed on (to other groups or to mates), and those
	// dropped for want of room.
	relayed, relayDropped atomic.Uint64
	// Digest entries whose origin is no member listed, and tagged ones
	// whose incarnation the limiter has not heard.
	notMember, untagged atomic.Uint64
}

// WarnEvery spaces the WARN records of a transport that keeps refusing
// datagrams and of peers of another release (ns).
const WarnEvery = int64(30 * time.Second)

// Mates are the members of this node's group, as the hub last read the
// member list; none while the cluster is not grouped.
func (h *Hub) Mates() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.rel.view.grouped() {
		return nil
	}
	return slices.Clone(h.rel.view.mates)
}

// Counts are a hub's counters, read at one instant: the frames it dropped
// (not parsed, of no limiter here, of another wire version, digest entries
// of no member or of an incarnation not heard), the datagrams it sent (and
// each counted per peer it went to, with its bytes), and frames of others
// it passed on or dropped for want of room.
type Counts struct {
	Malformed, OtherLimiter, OtherVersion, NotMember, Untagged uint64
	DatagramsSent, SendFailures, PeerDatagrams, PeerBytes      uint64
	Relayed, RelayDropped                                      uint64
}

// Counts reads the hub's counters.
func (h *Hub) Counts() Counts {
	s := &h.stats
	return Counts{
		Malformed: s.malformed.Load(), OtherLimiter: s.otherLimiter.Load(), OtherVersion: s.ofVersion.Load(),
		NotMember: s.notMember.Load(), Untagged: s.untagged.Load(),
		DatagramsSent: s.datagramsSent.Load(), SendFailures: s.sendFailures.Load(),
		PeerDatagrams: s.peerDatagrams.Load(), PeerBytes: s.peerBytes.Load(),
		Relayed: s.relayed.Load(), RelayDropped: s.relayDropped.Load(),
	}
}

// bundleDelay is how long a frame that need not go at once waits for the
// frames of the other limiters on its transport. Ticks of limiters on one
// transport fall on the same instants, so their heartbeats meet well
// within it; a heartbeat a millisecond late changes nothing.
const bundleDelay = time.Millisecond

// hubs are the shared hubs, by transport. A transport that cannot be a map
// key gets a hub per limiter.
var hubs = struct {
	mu sync.Mutex
	m  map[Transport]*Hub
}{m: map[Transport]*Hub{}}

// Join hands the limiter l (of ID hash id, ticking every tick) the hub of
// its transport t, subscribing the transport's one hub on the first join.
// clock and log are the hub's if it is new.
func Join(t Transport, id uint64, l Limiter, tick int64, clock transportkit.Clock, log *slog.Logger) *Hub {
	shared := reflect.ValueOf(t).Comparable()
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	var h *Hub
	if shared {
		h = hubs.m[t]
	}
	if h == nil {
		h = &Hub{t: t, name: t.Name(), clock: clock, maxFrame: t.MaxFrameSize(), log: log, limiters: map[uint64]Limiter{}, began: clock.Now(), tick: tick}
		h.uni = unicaster(t)
		if shared {
			hubs.m[t] = h
		}
		h.unsubscribe = t.Subscribe(h.receive)
	}
	h.mu.Lock()
	h.limiters[id] = l
	h.tick = min(h.tick, tick)
	h.mu.Unlock()
	return h
}

// Began is when the hub began: limiters on one transport tick on a grid
// from it.
func (h *Hub) Began() time.Time { return h.began }

// unicaster is t as a Unicaster, when it is one with room in its
// datagrams for a relay envelope around a frame.
func unicaster(t Transport) Unicaster {
	u, ok := t.(Unicaster)
	if !ok || t.MaxFrameSize()-relayReserve < transportkit.MinFrameSize {
		return nil
	}
	return u
}

// FrameRoom is the largest frame a limiter on t may send: the transport's
// datagram, less the room a relay envelope needs where frames may be
// relayed.
func FrameRoom(t Transport) int {
	if unicaster(t) != nil {
		return t.MaxFrameSize() - relayReserve
	}
	return t.MaxFrameSize()
}

// Leave takes the limiter of ID hash id off the hub; the last limiter to
// leave sends what is pending and unsubscribes the hub from its transport.
func (h *Hub) Leave(id uint64) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	h.mu.Lock()
	delete(h.limiters, id)
	last := len(h.limiters) == 0
	if last {
		h.flushLocked()
		if h.stopRelay != nil { // frames of others kept for later: no one will send them now
			h.stopRelay()
			h.stopRelay = nil
		}
		h.rel = relays{}
	}
	h.mu.Unlock()
	if !last {
		return
	}
	if hubs.m[h.t] == h {
		delete(hubs.m, h.t)
	}
	h.unsubscribe()
}

// Send queues frame for every peer: at once when now is set, within
// bundleDelay otherwise. The frame counts in st as sent, or as refused,
// once its datagram has gone.
func (h *Hub) Send(st *Sent, frame []byte, now bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pending)+len(frame) > h.maxFrame {
		h.flushLocked()
	}
	h.pending = append(h.pending, frame...)
	h.senders = append(h.senders, pendingFrame{st, len(frame)})
	if now || len(h.limiters) < 2 {
		// Alone on its transport a limiter has no one to share with: its
		// frames go at once, as they did before the hub.
		h.flushLocked()
		return
	}
	if h.stopTimer == nil {
		h.stopTimer = h.clock.AfterFunc(bundleDelay, h.Flush)
	}
}

// SendAll is Send for frames made together (a tick's resends and its
// heartbeat or report): they share datagrams even for a limiter alone on
// its transport, which otherwise sends each at once.
func (h *Hub) SendAll(st *Sent, frames [][]byte) {
	if len(frames) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, frame := range frames {
		if len(h.pending)+len(frame) > h.maxFrame {
			h.flushLocked()
		}
		h.pending = append(h.pending, frame...)
		h.senders = append(h.senders, pendingFrame{st, len(frame)})
	}
	if len(h.limiters) < 2 {
		h.flushLocked()
		return
	}
	if h.stopTimer == nil {
		h.stopTimer = h.clock.AfterFunc(bundleDelay, h.Flush)
	}
}

// Flush sends what is pending now.
func (h *Hub) Flush() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushLocked()
}

// flushLocked sends the pending frames: as one datagram to every peer,
// or, in a grouped cluster, to each mate with the envelopes waiting for
// them, and the group's envelopes to one member of each covered group.
// Each frame counts in its limiter's stats as sent or refused. A
// transport that keeps refusing loses the cluster its limit, so that is
// logged, at most every WarnEvery.
func (h *Hub) flushLocked() {
	if h.stopTimer != nil {
		h.stopTimer()
		h.stopTimer = nil
	}
	if h.stopRelay != nil {
		h.stopRelay()
		h.stopRelay = nil
	}
	now := h.sinceBegan()
	h.rel.refresh(h.t, h.name, now, h.uni != nil)
	if len(h.pending) == 0 && !h.rel.pending() && !h.rel.latestWaiting() {
		return
	}
	var err error
	if h.rel.view.grouped() {
		err = h.sendGrouped(now)
	} else if len(h.pending) > 0 {
		if err = h.t.Broadcast(h.pending); err == nil {
			h.stats.datagramsSent.Add(1)
			peers := uint64(h.rel.listed) // as the member list read within viewEvery
			h.stats.peerDatagrams.Add(peers)
			h.stats.peerBytes.Add(peers * uint64(len(h.pending)))
		}
	}
	for _, p := range h.senders {
		p.s.count(p.n, err == nil)
	}
	h.pending, h.senders = h.pending[:0], h.senders[:0]
	if err == nil {
		return
	}
	h.stats.sendFailures.Add(1)
	if h.lastSendWarn == 0 || now-h.lastSendWarn >= WarnEvery {
		h.lastSendWarn = now
		h.log.Warn("the transport refused a datagram; peers will not hear these limiters' admits until it sends again",
			"err", err, "refused so far", h.stats.sendFailures.Load())
	}
}

// sinceBegan is the hub's clock: ns since it began.
func (h *Hub) sinceBegan() int64 { return int64(h.clock.Now().Sub(h.began)) }

// sendGrouped sends this flush in a grouped cluster: the pending frames
// and the envelopes from other groups to every mate, and the group's
// envelopes (the pending frames among them) to the covered groups. It
// returns the first error, if any.
func (h *Hub) sendGrouped(now int64) error {
	h.rel.redeal(h.name, now, h.tick)
	if len(h.pending) > 0 {
		_, dropped := h.rel.forGroups(h.name, h.pending, now, h.tick, h.maxFrame)
		h.stats.relayDropped.Add(dropped)
	}
	queued, dropped, waiting := h.rel.dueLatest(h.name, now, quietEvery(h.tick), h.maxFrame)
	h.stats.relayed.Add(queued)
	h.stats.relayDropped.Add(dropped)
	var first error
	note := func(err error) {
		if first == nil {
			first = err
		}
	}
	if len(h.pending) > 0 || len(h.rel.toMates) > 0 {
		// This node's frames of running totals go to the mates as
		// entries (own_entries.go).
		h.rel.own.split(h.name, h.pending, now, h.tick, h.rel.wholeUntil)
		toMates := h.rel.own.merge(h.rel.toMates, h.maxFrame)
		for _, m := range h.rel.view.mates {
			note(h.sendPieces(m, h.rel.own.keyed, toMates))
		}
	}
	if len(h.rel.toGroups) > 0 {
		h.targets = h.rel.targets(h.targets[:0], now, h.tick)
		for _, t := range h.targets {
			note(h.sendPieces(t, nil, h.rel.toGroups))
		}
	}
	h.rel.sent()
	if waiting {
		h.armRelayLocked()
	}
	return first
}

// sendPieces sends head (frames that fit one datagram) and the envelopes
// of pieces to one member, in as few datagrams as fit.
func (h *Hub) sendPieces(to string, head, pieces []byte) error {
	var first error
	d := append(h.dgram[:0], head...)
	send := func() {
		if len(d) == 0 {
			return
		}
		if err := h.uni.SendTo(to, d); err != nil {
			if first == nil {
				first = err
			}
		} else {
			h.stats.datagramsSent.Add(1)
			h.stats.peerDatagrams.Add(1)
			h.stats.peerBytes.Add(uint64(len(d)))
		}
		d = d[:0]
	}
	for len(pieces) > 0 {
		piece, rest, err := wire.Next(pieces)
		if err != nil {
			break // cannot happen: the hub wrote them
		}
		pieces = rest
		if len(piece) > h.maxFrame {
			h.stats.relayDropped.Add(1)
			continue
		}
		if len(d)+len(piece) > h.maxFrame {
			send()
		}
		d = append(d, piece...)
	}
	send()
	h.dgram = d
	return first
}

// receive splits a datagram into its frames and envelopes and hands each
// frame to the limiter it names; in a grouped cluster it queues what it
// must pass on. A datagram that cannot be split is dropped from the first
// bad piece on, and counted; one of another wire version is logged, at
// most every WarnEvery, since it means a node of another release,
// not noise.
func (h *Hub) receive(from string, b []byte) {
	if len(b) == 0 {
		h.stats.malformed.Add(1)
		return
	}
	all := b
	relayable := false
	for len(b) > 0 {
		f, rest, err := wire.Next(b)
		if err != nil {
			if err == wire.ErrVersion {
				h.stats.ofVersion.Add(1)
				h.warnVersion(from, b[2])
			} else {
				h.stats.malformed.Add(1)
			}
			all = all[:len(all)-len(b)]
			break
		}
		b = rest
		if wire.IsRelay(f) {
			h.receiveRelay(from, f)
			continue
		}
		relayable = true
		h.deliver(from, f, false)
	}
	if relayable && h.uni != nil {
		h.mu.Lock()
		if h.rel.view.grouped() && h.rel.view.isMate(from) {
			h.rel.heardFrom(from, h.sinceBegan())
			h.queueForGroupsLocked(from, all)
		}
		h.mu.Unlock()
	}
}

// queueForGroupsLocked queues a mate's frames (the envelopes among them
// are skipped) for the covered groups, and makes sure a datagram takes
// them within relayDelay.
func (h *Hub) queueForGroupsLocked(from string, b []byte) {
	queued, dropped := h.rel.forGroups(from, b, h.sinceBegan(), h.tick, h.maxFrame)
	h.stats.relayed.Add(queued)
	h.stats.relayDropped.Add(dropped)
	h.armRelayLocked()
}

// receiveRelay opens an envelope, hands its frames to their limiters as
// the origin's, and queues it for this node's mates unless it is on its
// last hop. A node's own frames relayed back to it are dropped.
func (h *Hub) receiveRelay(from string, env []byte) {
	if wire.IsDigest(env) {
		h.receiveDigest(from, env)
		return
	}
	r, err := wire.OpenRelay(env)
	if err != nil {
		h.stats.malformed.Add(1)
		return
	}
	if string(r.Origin) == h.name {
		return
	}
	h.mu.Lock()
	origin, known := h.rel.names[string(r.Origin)] // a member's name, without a copy
	h.mu.Unlock()
	if !known {
		origin = string(r.Origin)
	}
	frames := uint64(0)
	for b := r.Frames; len(b) > 0; frames++ {
		var f []byte
		f, b, _ = wire.Next(b) // OpenRelay has split them all
		h.deliver(origin, f, true)
	}
	if h.uni == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.rel.view.grouped() {
		return
	}
	if known {
		h.rel.heardFrom(origin, h.sinceBegan()) // an invented name is not kept
	}
	if r.Spread {
		return
	}
	if h.rel.forMates(r.Origin, r.Frames) {
		h.stats.relayed.Add(frames)
		h.armRelayLocked()
	} else {
		h.stats.relayDropped.Add(frames)
	}
}

// receiveDigest opens a digest and hands each entry, as the frame it
// stands for, to the digest's limiter as its origin's; it queues the
// digest for this node's mates unless it is on its last hop. An entry
// whose origin is no member this node lists is dropped (counted as from
// a non-member): it brings running totals only, and the next entry after
// the member list has the origin brings them all. So is a tagged entry
// whose tag matches no incarnation of its origin's that the limiter has
// heard (counted as stale): a whole entry comes within wholeEvery; and so
// is one whose truncated totals this node cannot widen, having heard the
// stream last over TotalsHorizon ago. A node's own entries are dropped.
// An entry of the sender's own (from) in a digest on its last hop is a
// frame from it, not relayed: a mate's running totals (own_entries.go),
// which this node passes on to the groups it covers.
func (h *Hub) receiveDigest(from string, piece []byte) {
	d, err := wire.OpenDigest(piece)
	if err != nil {
		h.stats.malformed.Add(1)
		return
	}
	var f wire.Frame
	buf := frameBufs.Get().(*[wire.HeaderMax]byte)
	defer frameBufs.Put(buf)
	now, entries := h.sinceBegan(), uint64(0)
	fromHash := wire.OriginHash(from)
	for b := d.Entries; len(b) > 0; entries++ {
		f.Limiter = d.Limiter
		var e wire.Entry
		e, b, _ = wire.NextEntry(b, &f) // OpenDigest has read them all
		h.mu.Lock()
		name := h.rel.byHash[e.Origin]
		if d.Spread && e.Origin == fromHash {
			// The sender's own: named by the transport, heard before this
			// node's first member list as a frame would be.
			name = from
		}
		known := name != ""
		if known && name != h.name && h.rel.view.grouped() {
			h.rel.heardFrom(name, now)
		}
		eng := h.limiters[d.Limiter]
		h.mu.Unlock()
		switch {
		case !known:
			h.stats.notMember.Add(1)
			continue
		case name == h.name:
			continue
		case eng == nil:
			h.stats.otherLimiter.Add(1)
			continue
		case e.Tagged:
			s, ok := eng.TaggedStream(name, e.Tag, TotalsHorizon(h.tick))
			if ok && (e.GlobalBits != 0 || e.DemandBits != 0) {
				ok = s.Recent && widen(&f.GlobalSum, e.GlobalBits, s.Global) && widen(&f.DemandSum, e.DemandBits, s.Demand)
			}
			if !ok || uint64(f.Global) > f.GlobalSum {
				h.stats.untagged.Add(1)
				continue
			}
			f.Incarnation = s.Incarnation
		}
		// The sender's own entries in a digest on its last hop: a mate's
		// (own_entries.go). A relay's own in the digests it sends other
		// groups are relayed: it turns through their members, so each
		// hears it directly only now and then.
		direct := d.Spread && name == from
		eng.Deliver(name, wire.Encode(buf[:0], &f), !direct)
		if direct && h.uni != nil {
			h.mu.Lock()
			if h.rel.view.grouped() && h.rel.view.isMate(from) && len(h.rel.view.covered) > 0 {
				h.rel.keepLatest(relayStream{from, f.Limiter}, &f, now, h.tick)
				h.armRelayLocked()
			}
			h.mu.Unlock()
		}
	}
	if h.uni == nil || d.Spread {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.rel.view.grouped() {
		return
	}
	if h.rel.digestForMates(piece) {
		h.stats.relayed.Add(entries)
		h.armRelayLocked()
	} else {
		h.stats.relayDropped.Add(entries)
	}
}

// frameBufs hold the frames a digest's entries are turned back into: a
// buffer on the stack would escape through the Limiter interface and cost
// an allocation per digest.
var frameBufs = sync.Pool{New: func() any { return new([wire.HeaderMax]byte) }}

// widen makes a truncated running total whole from the receiver's last
// total of its stream (wire.Widen); a total in full (bits 0) is left as
// it is.
func widen(total *uint64, bits uint8, last uint64) bool {
	if bits == 0 {
		return true
	}
	v, ok := wire.Widen(*total, bits, last)
	*total = v
	return ok
}

// deliver hands one frame to the limiter it names.
func (h *Hub) deliver(from string, f []byte, relayed bool) {
	h.mu.Lock()
	l := h.limiters[frameLimiter(f)]
	h.mu.Unlock()
	if l == nil {
		h.stats.otherLimiter.Add(1)
		return
	}
	l.Deliver(from, f, relayed)
}

// armRelayLocked makes sure the envelopes and frames waiting go out
// within relayDelay, with the next datagram this node sends or on their
// own.
func (h *Hub) armRelayLocked() {
	if h.stopRelay == nil && (h.rel.pending() || h.rel.latestWaiting()) {
		h.stopRelay = h.clock.AfterFunc(time.Duration(relayDelay(h.tick, len(h.rel.view.mates))), h.Flush)
	}
}

func (h *Hub) warnVersion(from string, version byte) {
	now := h.sinceBegan()
	h.mu.Lock()
	due := h.lastVersionWarn == 0 || now-h.lastVersionWarn >= WarnEvery
	if due {
		h.lastVersionWarn = now
	}
	h.mu.Unlock()
	if due {
		h.log.Warn("a peer sends frames of another wire version; they are refused until every node runs one release (docs/releasing.md)",
			"peer", from, "its version", version, "this node's", wire.Version, "refused so far", h.stats.ofVersion.Load())
	}
}
