package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/datagram"
	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// The sender is the engine's sending side: it keeps track of what this node
// admitted and has not reported yet, schedules the flushes that report it
// (early ones from the request path, regular ones on the tick), encodes the
// counts into frames that fit the transport, and resends the frames that
// carry keyed counts on the next ticks.
//
// A node that has seen no news for idleAfter (nothing admitted or refused
// here, no peer's frame with counts, more demand or a missing member, no
// newcomer) says so in its frames for idleFrames ticks, then sends
// nothing at all until news comes (busy, wake): a limiter that nobody
// uses costs no traffic, however many nodes share it. While a node is idle
// itself, it counts its idle peers as in sight for as long as the
// transport lists them (peerView.vouching); once it is busy, they must be
// heard again, and the news that woke it wakes them too. So a partition
// among idle nodes is found, as any other, within suspectAfter of the
// first news on either side, and no side takes the whole rate while
// another thinks it idle.
//
// It owns this node's running total of global admits (globalSum), which
// every frame carries, and the frames kept for resending. Lock-free (the
// request path uses them): kicked, flushArmed and the dirty lists (each
// shard under its own small lock). Everything else is under the engine's
// lock, held by the engine's tick, its kicked flush and stop.
type sender struct {
	*engineEnv
	word      reportedWord
	fair      reportedLoad    // the offered load and the level a frame reports
	keyShares reportedHotKeys // the hot keys, whose refusals a frame reports
	view      senderView      // the buckets' clock, the share withheld
	onKick    func()          // the engine's entry point for a kicked flush
	onArmed   func()          // and for an armed one

	kicked, flushArmed atomic.Bool
	flushDelay         int64 // the longest a first unreported admit waits; fixed
	dirty              [dirtyShards]dirtyList
	stats              senderStats

	// Under the engine's lock.
	seq       uint64
	globalSum uint64                    // global tokens reported since this incarnation began
	sent      [resendTicks + 1][][]byte // frames of this tick and the last ones
	lastFlush int64
	batch     []wire.KeyCount
	// lastBusy is when news last came (busy); lastDemand is the demand
	// total the last frame carried.
	lastBusy   int64
	lastDemand uint64
	idleSent   int // frames that said idle since then; idleFrames: quiet
	// ticking collects the frames of a tick (tickFrames), which go to the
	// hub together.
	ticking    bool
	tickFrames [][]byte
}

// idleAfter is how long a node must see no news before it goes idle:
// many ticks, so that a pause between requests does not turn the
// heartbeats off and on; idleFrames is how many ticks say so before it
// goes quiet, so that one lost datagram does not leave a peer taking the
// silence for a partition.
func (e *engineEnv) idleAfter() int64 { return 20 * e.tick }

const idleFrames = 3

const dirtyShards = 64

// dirtyList is one shard of the keyed entries that hold unsent counts.
type dirtyList struct {
	mu   sync.Mutex
	list []dirtyKey
	_    [32]byte
}

type dirtyKey struct {
	h uint64
	e *clusterEntry
}

type senderStats struct {
	datagram.Sent  // the frames, as the hub sent them
	tokensReported atomic.Uint64
}

// begin readies the sender at the engine's start.
func (s *sender) begin(now int64) { s.lastFlush, s.lastBusy = now-minFlushGap, now }

// busy notes news at now: this node stays awake until idleAfter from
// now. An idle node stops vouching for its idle peers, which must be heard
// again (the news wakes them). The caller holds the engine's lock.
func (s *sender) busy(now int64) {
	if s.idleSent > 0 {
		s.view.awake(now)
	}
	s.lastBusy, s.idleSent = now, 0
}

// wake is busy for a peer's news (peerView.arrived), and a quiet node
// answers at once: a newcomer must hear this node's level within its first
// intervals (joining), and a peer that misses this node, or that has just
// woken, must hear it within suspectAfter. The caller holds the engine's
// lock.
func (s *sender) wake(now int64) {
	quiet := s.idleSent >= idleFrames
	s.busy(now)
	if quiet {
		s.flush(now, true, false, true)
	}
}

// counted schedules the flush that reports a count that just grew by n to
// v: at once when it crosses the threshold, and within flushDelay when it is
// the first unreported token. Holding every node's admits for the same
// short time keeps the cluster fair: a node whose admits stayed unreported
// longer would let its peers spend tokens it had already spent, and busy
// nodes, which flush more often, would win more and more of the bucket.
// While the share is sliced, the count waits for the tick instead: the
// share paces this node's admits, a few a second at most, and reported
// one by one they cost a datagram to every mate each.
// Lock-free: the request path calls it.
func (s *sender) counted(v, n int64, rule *bucket.Rule) {
	if at := rule.FlushAt.Load(); v >= at && v-n < at {
		s.kick()
	} else if v == n && !s.fair.slicing() {
		s.armFlush()
	}
}

// countKeyed counts n tokens admitted from key hash h's entry for the next
// flush. Lock-free: the request path calls it.
func (s *sender) countKeyed(h uint64, ent *clusterEntry, rule *bucket.Rule, n int64) {
	v := ent.addPending(n)
	if v == n { // first unsent admit since the last flush
		d := &s.dirty[h%dirtyShards]
		d.mu.Lock()
		d.list = append(d.list, dirtyKey{h, ent})
		d.mu.Unlock()
	}
	s.counted(v, n, rule)
}

// refusedKeyed counts n tokens of hot key hash h (share k) refused for
// want of tokens, the key's offered load (key_shares.go): the next flush
// reports them. Lock-free: the request path calls it.
func (s *sender) refusedKeyed(h uint64, ent *clusterEntry, k *keyShare, n int64) {
	if k.addRefused(n) == n { // the first since the last flush
		d := &s.dirty[h%dirtyShards]
		d.mu.Lock()
		d.list = append(d.list, dirtyKey{h, ent})
		d.mu.Unlock()
	}
}

// kick schedules an early flush now unless one is already scheduled.
func (s *sender) kick() {
	if s.kicked.CompareAndSwap(false, true) {
		s.clock.AfterFunc(0, s.onKick)
	}
}

// armFlush schedules a flush flushDelay from now unless one is already
// scheduled: every node holds its first unreported admit for the same
// short time.
func (s *sender) armFlush() {
	if s.flushArmed.CompareAndSwap(false, true) {
		s.clock.AfterFunc(time.Duration(s.flushDelay), s.onArmed)
	}
}

// armedFlush is the flush armFlush scheduled. Unlike a kick, which the
// threshold or the local cap calls for at once, it reports counts that
// have already waited flushDelay, so it may wait the hub's bundleDelay
// more for the frames of the transport's other limiters. The caller holds
// the engine's lock.
func (s *sender) armedFlush(now int64) {
	s.disarm()
	s.flush(now, false, false, false)
}

// disarm forgets the armed flush: it ran, or the engine stopped.
func (s *sender) disarm() { s.flushArmed.Store(false) }

// kickFired notes that the kick's timer went off, before the engine takes
// its lock for the flush: a request from now on may kick again.
func (s *sender) kickFired() { s.kicked.Store(false) }

// kickedFlush is an early flush, unless the last one was under minFlushGap
// ago: then it is kicked again once the gap has passed. The caller holds
// the engine's lock.
func (s *sender) kickedFlush(now int64) {
	if wait := s.lastFlush + minFlushGap - now; wait > 0 {
		if s.kicked.CompareAndSwap(false, true) {
			s.clock.AfterFunc(time.Duration(wait), s.onKick)
		}
		return
	}
	s.flush(now, false, false, true)
}

// tick resends the last ticks' frames, then sends this tick's (a header
// at least, the heartbeat that tells peers we are here, unless this node
// is quiet). They go to the hub together, so that they share datagrams,
// with each other and with the frames of the transport's other limiters
// (package datagram). The caller holds the engine's lock.
func (s *sender) tick(now int64) {
	if s.view.takeArrival() {
		s.wake(now)
	}
	s.ticking = true
	for i := resendTicks; i >= 1; i-- {
		for _, f := range s.sent[i-1] {
			s.broadcast(f, false)
		}
	}
	copy(s.sent[1:], s.sent[:resendTicks])
	s.sent[0] = nil
	s.flush(now, true, false, false)
	s.ticking = false
	s.hub.SendAll(&s.stats.Sent, s.tickFrames)
	clear(s.tickFrames)
	s.tickFrames = s.tickFrames[:0]
}

// goodbye sends a last frame that says this node is leaving, with any
// unsent counts, as often as a frame is resent. The caller holds the
// engine's lock.
func (s *sender) goodbye(now int64) {
	frames := s.flush(now, true, true, true)
	for range resendTicks {
		for _, f := range frames {
			s.broadcast(f, true)
		}
	}
}

// flush sends every unsent count, split into frames that fit the
// transport, and keeps them for resending. With heartbeat (the tick's
// flush) it sends a bare header when there is nothing to count. With
// atOnce the frames go out at once (a kick, a goodbye); otherwise within
// the hub's bundleDelay, sharing datagrams with the transport's other
// limiters. It returns the frames sent. The caller holds the engine's
// lock.
func (s *sender) flush(now int64, heartbeat, leaving, atOnce bool) [][]byte {
	at := s.view.bucketTime(now)
	global := s.word.drain(s.rules.Default(), at)
	batch := s.batch[:0]
	var flights []flying
	for i := range s.dirty {
		d := &s.dirty[i]
		d.mu.Lock()
		list := d.list
		d.list = nil
		d.mu.Unlock()
		for _, k := range list {
			n, refused := k.e.takePending(), int64(0)
			if ks := k.e.fair.Load(); ks != nil {
				refused = ks.takeRefused()
			}
			if n > 0 || refused > 0 {
				s.keyShares.sent(k.h, n, refused, now)
			}
			if n == 0 && (refused == 0 || !s.keyShares.reportable(k.h, now)) {
				continue // refusals only matter to the peers of a hot key
			}
			rule := s.rules.ForKey(k.h)
			level := min(max(bucket.Level(&k.e.tat, rule, at)/rule.Interval, -rule.BucketSize), rule.BucketSize)
			batch = append(batch, wire.KeyCount{Key: k.h, Tokens: n, Refused: refused, Level: level})
			if n > 0 && !s.floor {
				k.e.addInflight(n)
				flights = append(flights, flying{k.e, n})
			}
		}
	}
	s.batch = batch[:0]
	s.inFlight(global, flights)
	reported := uint64(global)
	for _, kc := range batch {
		reported += uint64(kc.Tokens)
	}
	s.stats.tokensReported.Add(reported)
	demand := s.fair.demandTotal(s.globalSum + uint64(global))
	// A node that misses a member stays awake, and says so: its peers'
	// idle frames may be what it missed (a partition shorter than the
	// failure detector leaves the member list as it was), and an idle peer
	// that hears this frame wakes, so that this node hears it again.
	partial := s.view.partial()
	idle := false
	if global > 0 || len(batch) > 0 || demand != s.lastDemand || partial || leaving || s.floor {
		s.busy(now)
		s.lastDemand = demand
	} else if heartbeat && now-s.lastBusy >= s.idleAfter() {
		if s.idleSent >= idleFrames {
			return nil // quiet: idle peers count this node as in sight
		}
		if s.idleSent == 0 {
			s.view.idle()
		}
		idle = true
		s.idleSent++
	}
	if global == 0 && len(batch) == 0 && !heartbeat && !leaving {
		return nil
	}
	s.lastFlush = now
	s.globalSum += uint64(global)
	// Only keyed entries need numbering and resending: the global total
	// rides in every frame, heartbeats included.
	carries := len(batch) > 0
	var frames [][]byte
	f := wire.Frame{Leaving: leaving, Idle: idle, Partial: partial, Limiter: s.id, Incarnation: s.inc, GlobalSum: s.globalSum, Global: global,
		KeyHashID: s.keyHashID, DemandSum: demand, Level: s.fair.levelTokens(now), Withheld: uint64(s.view.withheldShare() * wire.WithheldOne)}
	for first := true; first || len(batch) > 0; first = false {
		// Fill one frame with as many entries as fit.
		room, n := s.maxFrame-wire.HeaderMax, 0
		for n < len(batch) && room >= wire.EntrySize(batch[n]) {
			room -= wire.EntrySize(batch[n])
			n++
		}
		f.Seq = 0
		if carries {
			s.seq++
			f.Seq = s.seq
		}
		b := wire.AppendHeader(make([]byte, 0, s.maxFrame-room), &f, n)
		for _, kc := range batch[:n] {
			b = wire.AppendEntry(b, kc)
		}
		batch = batch[n:]
		f.Global = 0 // the global count rides in the first frame only
		s.broadcast(b, atOnce)
		frames = append(frames, b)
	}
	if carries {
		s.sent[0] = append(s.sent[0], frames...)
	}
	return frames
}

// inFlight counts the tokens of a flush as unheard for reportFlight: the
// global count here, the keyed ones (already added to their entries) in
// keyed.
func (s *sender) inFlight(global int64, keyed []flying) {
	if s.floor || global == 0 && len(keyed) == 0 {
		return
	}
	s.word.addInflight(global)
	s.clock.AfterFunc(time.Duration(reportFlight), func() {
		s.word.addInflight(-global)
		for _, f := range keyed {
			f.ent.addInflight(-f.n)
		}
	})
}

// flying is a keyed entry's count in flight.
type flying struct {
	ent *clusterEntry
	n   int64
}

// broadcast sends b to every peer through the transport's hub: at once,
// or within bundleDelay with the frames of the transport's other limiters;
// during a tick, with the tick's other frames. The hub counts it sent or
// refused, and logs refusals.
func (s *sender) broadcast(b []byte, now bool) {
	if s.ticking {
		s.tickFrames = append(s.tickFrames, b)
		return
	}
	s.hub.Send(&s.stats.Sent, b, now)
}
