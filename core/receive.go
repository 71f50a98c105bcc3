package gopherpace

import (
	"math"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// The engine's receiving side: frames from peers, charged to the local
// replicas. Every byte of a frame is the sender's word, and the sender may
// be lying (docs/security.md): nothing received ever adds tokens, and a
// frame can at worst charge one bucket's worth of debt.

// maxClockSkew is how far ahead of this node's clock a peer's incarnation
// (its start time) may be. Frames claiming a later start are dropped as
// implausible, and logged.
const maxClockSkew = int64(time.Hour)

// unlisted keeps, for a while, the frames of senders the transport
// does not list as members yet: a node that just joined is heard before
// every member's list has it, and its keyed counts (deltas, unlike the
// global running total) would be lost once the sender's resends ran out.
// The frames are applied if the sender is listed within unlistedFor, and
// dropped (counted in FramesNotMember) otherwise. The frames kept are
// bounded, so invented names cost at most unlistedFrames copies.
type unlisted struct {
	frames []keptFrame
}

type keptFrame struct {
	from string
	b    []byte
	at   int64
}

const (
	unlistedFrames = 64
	unlistedFor    = int64(2 * time.Second)
)

// keep keeps a copy of b from from, unless the kept frames fill their cap.
func (u *unlisted) keep(from string, b []byte, now int64) bool {
	if len(u.frames) >= unlistedFrames {
		return false
	}
	u.frames = append(u.frames, keptFrame{from, append([]byte(nil), b...), now})
	return true
}

// replay applies the kept frames whose senders are now members, and drops
// those kept for longer than unlistedFor. The caller holds e.mu and has
// just refreshed the member list.
func (e *engine) replayUnlisted(now int64) {
	u := &e.unlisted
	if len(u.frames) == 0 {
		return
	}
	kept := u.frames
	u.frames = nil
	for i, h := range kept {
		switch {
		case e.peers[h.from] != nil:
			e.apply(h.from, h.b, false)
		case now-h.at > unlistedFor:
			e.stats.notMember.Add(1)
		default:
			u.frames = append(u.frames, kept[i])
		}
	}
}

// memberRefreshGap spaces the member-list refreshes that a frame from an
// unlisted sender triggers, so that a flood of invented names costs one
// Members call per gap.
const memberRefreshGap = int64(time.Millisecond)

func (e *engine) receive(from string, b []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	e.stats.framesReceived.Add(1)
	e.stats.bytesReceived.Add(uint64(len(b)))
	e.apply(from, b, true)
}

// apply reads one frame from from and charges it; a frame from a sender
// not (yet) listed as a member is kept for later when keep is set (see
// unlisted). The caller holds e.mu.
func (e *engine) apply(from string, b []byte, keep bool) {
	f := &e.rx
	if err := wire.Decode(b, f); err != nil {
		e.stats.malformed.Add(1)
		return
	}
	if f.Limiter != e.id {
		e.stats.otherLimiter.Add(1)
		return
	}
	now := e.now()
	p := e.member(from, now)
	if p == nil {
		if !keep || !e.unlisted.keep(from, b, now) {
			e.stats.notMember.Add(1)
		}
		return
	}
	if wall := e.clock.Now().UnixNano(); wall > 0 && f.Incarnation > uint64(wall)+uint64(maxClockSkew) {
		e.stats.malformed.Add(1)
		e.warnf(now, &e.lastSkewWarn, "frames from a peer claim a start time over an hour ahead of this node's clock; dropped. Check both nodes' clocks",
			"peer", from, "ahead", time.Duration(f.Incarnation-uint64(wall)))
		return
	}
	s, lost := p.stream(f.Incarnation)
	e.stats.lostPrevious.Add(lost)
	if f.Seq == 0 {
		if len(f.Keys) > 0 {
			e.stats.malformed.Add(1) // keyed counts must be numbered
			return
		}
	} else if !s.window.accept(f.Seq) {
		e.stats.duplicate.Add(1)
		return
	}
	wasVisible := s.synced && now-s.lastHeard <= e.isolation
	s.lastHeard, p.lastHeard, p.heard, p.departed = now, now, true, f.Leaving
	// A node decides at most one request a nanosecond, each of at most a
	// bucket of tokens (a larger cost is refused before it is counted).
	s.load.observe(f.GlobalSum, f.DemandSum, now, e.pols.dflt().burst)
	// A real peer reports its level clamped to ±B (levelTokens), so a
	// level outside that range is a lie: clamped, it can only claim an
	// emptier replica, which lowers this one by at most a bucket's debt.
	level := min(max(f.Level, -e.pols.dflt().burst), e.pols.dflt().burst)
	e.contact(now, f.Incarnation, level)
	global := e.globalCharge(s, f, wasVisible)
	if p.predicted > 0 {
		// Part of this peer's count was withheld while it was silent: if
		// it was only slow, charge the rest; after a longer silence the
		// withheld share stands for what it admitted (membership.go).
		if wasVisible {
			global -= min(global, int64(p.predicted))
		}
		p.predicted = 0
	}
	charged := uint64(global)
	for _, kc := range f.Keys {
		charged += uint64(kc.Tokens)
	}
	e.stats.tokensCharged.Add(charged)
	at := e.bucketTime(now)
	if global > 0 {
		e.global.debit(e.pols.dflt(), at, global, e.maxDebt(e.pols.dflt()))
	}
	for _, kc := range f.Keys {
		pol := e.pols.forKey(kc.Key)
		if !e.keys.debit(kc.Key, pol, at, kc.Tokens, e.maxDebt(pol)) {
			e.stats.keysDropped.Add(1)
		}
	}
	// With the frame's counts charged, this replica and the sender's have
	// seen the same admits but this node's unreported ones (and those in
	// flight): the difference of the levels is their offset (fairness.go).
	s.offsets.observe(e.levelTokens(now)+e.global.pending()-level, now, at)
	s.level, s.withheld = level, float64(f.Withheld)/wire.WithheldOne
}

// member returns the peer record of a sender that the transport lists as
// a member, or nil. An unlisted name gets one refresh of the list (at most
// one per memberRefreshGap), for a member that joined since the last tick.
func (e *engine) member(name string, now int64) *peer {
	if p := e.peers[name]; p != nil {
		return p
	}
	if now-e.lastMemberRefresh < memberRefreshGap {
		return nil
	}
	e.refreshMembers(now)
	return e.peers[name]
}

// refreshMembers reads the transport's member list and gives every listed
// member a peer record. It returns the list.
func (e *engine) refreshMembers(now int64) []string {
	e.lastMemberRefresh = now
	listed := e.t.Members()
	added := false
	for _, name := range listed {
		if name != e.name && e.peers[name] == nil {
			e.peers[name] = &peer{lastHeard: now}
			added = true
		}
	}
	if added || len(e.unlisted.frames) > 0 && now-e.unlisted.frames[0].at > unlistedFor {
		e.replayUnlisted(now)
	}
	return listed
}

// maxDebt is how far beyond empty a peer's charges may take a bucket of p:
// one bucket, or nothing for the reference design, which floors at zero.
func (e *engine) maxDebt(p *policy) int64 {
	if e.floor {
		return 0
	}
	return p.tolerance
}

// globalCharge works out how many of a stream's global admits this frame
// brings that were not charged yet. Normally that is the growth of the
// sender's running total, so a lost frame costs nothing but delay. Two cases
// take only the frame's own delta and start counting from its total:
//   - the first frame from a peer that is older than this node: what it
//     admitted before this node existed is already reflected in a
//     newcomer's empty buckets;
//   - the first frame after the peer was out of sight: while cut off, each
//     side refilled at its share of the rate, so charging the other side's
//     admits from that time would charge them twice and stall the bucket.
//
// The first frame from a peer of the same age or younger brings its whole
// total: it may have admitted before it knew of this node (memberlist
// spreads news of a join by gossip), and those admits are this bucket's too.
//
// A frame's charge never exceeds what the bucket can hold as debt, and the
// watermark moves only by what was charged. A total far below the
// watermark, which no reordering explains, means the watermark came from a
// frame that lied: the stream resyncs to the true total, so a lie can
// cause over-charging (a bounded stall), never missed admits.
func (e *engine) globalCharge(s *stream, f *wire.Frame, wasVisible bool) int64 {
	p := e.pols.dflt()
	limit := (p.tolerance + e.maxDebt(p)) / p.interval // a frame's charge, at most
	charge := func(n uint64) int64 { return int64(min(n, uint64(limit))) }
	resync := func() int64 { s.charged, s.synced = f.GlobalSum, true; return charge(uint64(f.Global)) }
	switch {
	case !s.synced && f.Incarnation+uint64(2*e.interval) >= e.inc:
		s.charged, s.synced = f.GlobalSum, true
		return charge(f.GlobalSum)
	case !s.synced, !wasVisible:
		return resync()
	case f.GlobalSum > s.charged:
		n := charge(f.GlobalSum - s.charged)
		s.charged += uint64(n)
		return n
	case s.charged-f.GlobalSum > e.reorderSlack():
		return resync()
	}
	return 0
}

// reorderSlack is how far below the watermark a true total can arrive: the
// admits of one gossip interval, plus a bucket, are more than frames
// reordered in flight ever differ by.
func (e *engine) reorderSlack() uint64 {
	p := e.pols.dflt()
	perInterval := uint64(e.interval / p.interval)
	return min(uint64(p.burst)+perInterval, math.MaxUint64/2)
}

// contact runs on every fresh frame. The first one ends the pre-contact
// share; a peer that has been up for a while tells this node that it joined
// a running cluster, whose buckets may be spent: its own replica of the
// global bucket comes down to the level the peer reports (never below
// empty), instead of bringing a fresh full bucket, and its keyed replicas
// start empty. A cluster that formed moments ago and is idle reports full
// buckets, so its first burst is not refused (before, a node that joined a
// second after the first emptied its bucket and refused a burst of B at
// the rate's pace).
func (e *engine) contact(now int64, peerInc uint64, level int64) {
	if !e.contacted {
		e.contacted = true
		if e.mode.Load() == modePreContact {
			e.enter(modeNormal)
		}
	}
	if e.learned || e.floor {
		return
	}
	if peerInc+uint64(2*e.interval) < e.inc {
		e.learned = true
		e.log.Info("joined a running cluster: starting from its level", "node", e.name, "tokens", max(level, 0))
		b := e.bucketTime(now)
		e.global.lowerTo(e.pols.dflt(), b, level)
		e.keys.each(func(h uint64, ent *clusterEntry) { empty(&ent.tat, e.pols.forKey(h), b) })
	}
}

// warnf logs a WARN record at most once per degradedLogEvery, tracked in
// *last; the caller holds e.mu.
func (e *engine) warnf(now int64, last *int64, msg string, args ...any) {
	if *last != 0 && now-*last < degradedLogEvery {
		return
	}
	*last = now
	e.log.Warn(msg, append([]any{"node", e.name}, args...)...)
}
