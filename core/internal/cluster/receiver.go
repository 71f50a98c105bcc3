package cluster

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// The receiver is the engine's receiving side: frames from peers, decoded
// and charged to the local replicas. Every byte of a frame is the sender's
// word, and the sender may be lying (docs/security.md): nothing received
// ever adds tokens, and a frame can at worst charge one bucket's worth of
// debt.
//
// It owns the frame being decoded and the frames of senders not listed yet
// (unlisted); what it learns of each peer goes into that peer's record
// through the peer view, and into the fairness state of the peer's stream.
// Its counters are atomic; everything else is under the engine's lock,
// held by the engine's receive and tick.
type receiver struct {
	*engineEnv
	word chargedWord
	view receiverView
	fair loadObserver
	join contactNoter
	// keyShares learns the peers' load of hot keys.
	keyShares hotKeyHearer
	// onJoinedRunning runs when this node learns that it joined a running
	// cluster (engine.go).
	onJoinedRunning func(now int64)

	stats receiverStats

	// Under the engine's lock.
	rx              wire.Frame
	unlisted        unlisted
	lastSkewWarn    int64
	lastKeyHashWarn int64
}

type receiverStats struct {
	framesReceived, bytesReceived, malformed, duplicate atomic.Uint64
	otherLimiter, keysDropped, notMember, tokensCharged atomic.Uint64
	otherKeyHash                                        atomic.Uint64
}

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
	from    string
	b       []byte
	at      int64
	relayed bool
}

const (
	unlistedFrames = 64
	unlistedFor    = int64(2 * time.Second)
)

// keep keeps a copy of b from from, unless the kept frames fill their cap.
func (u *unlisted) keep(from string, b []byte, now int64, relayed bool) bool {
	if len(u.frames) >= unlistedFrames {
		return false
	}
	u.frames = append(u.frames, keptFrame{from, append([]byte(nil), b...), now, relayed})
	return true
}

// afterRefresh runs whenever the peer view has read the transport's member
// list: when it listed someone new, or a kept frame has waited too long,
// the kept frames are replayed. The caller holds the engine's lock.
func (r *receiver) afterRefresh(now int64, added bool) {
	if added || len(r.unlisted.frames) > 0 && now-r.unlisted.frames[0].at > unlistedFor {
		r.replayUnlisted(now)
	}
}

// replayUnlisted applies the kept frames whose senders are now members,
// and drops those kept for longer than unlistedFor.
func (r *receiver) replayUnlisted(now int64) {
	u := &r.unlisted
	if len(u.frames) == 0 {
		return
	}
	kept := u.frames
	u.frames = nil
	for i, h := range kept {
		switch {
		case r.view.peer(h.from) != nil:
			r.apply(h.from, h.b, false, h.relayed)
		case now-h.at > unlistedFor:
			r.stats.notMember.Add(1)
		default:
			u.frames = append(u.frames, kept[i])
		}
	}
}

// receive takes one frame of from's, sent by from itself or relayed. The
// caller holds the engine's lock.
func (r *receiver) receive(from string, b []byte, relayed bool) {
	r.stats.framesReceived.Add(1)
	r.stats.bytesReceived.Add(uint64(len(b)))
	r.apply(from, b, true, relayed)
}

// apply reads one frame of from's and charges it; a frame from a sender
// not (yet) listed as a member is kept for later when keep is set (see
// unlisted).
func (r *receiver) apply(from string, b []byte, keep, relayed bool) {
	f := &r.rx
	if err := wire.Decode(b, f); err != nil {
		r.stats.malformed.Add(1)
		return
	}
	if f.Limiter != r.id {
		r.stats.otherLimiter.Add(1)
		return
	}
	now := r.now()
	p := r.view.member(from, now)
	if p == nil {
		if !keep || !r.unlisted.keep(from, b, now, relayed) {
			r.stats.notMember.Add(1)
		}
		return
	}
	if wall := r.clock.Now().UnixNano(); wall > 0 && f.Incarnation > uint64(wall)+uint64(maxClockSkew) {
		r.stats.malformed.Add(1)
		r.warnf(now, &r.lastSkewWarn, "frames from a peer claim a start time over an hour ahead of this node's clock; dropped. Check both nodes' clocks",
			"peer", from, "ahead", time.Duration(f.Incarnation-uint64(wall)))
		return
	}
	s := r.view.stream(p, f.Incarnation)
	if f.Seq == 0 {
		if len(f.Keys) > 0 {
			r.stats.malformed.Add(1) // keyed counts must be numbered
			return
		}
	} else if !s.window.accept(f.Seq) {
		r.stats.duplicate.Add(1)
		return
	}
	if len(f.Keys) > 0 && f.KeyHashID != r.keyHashID {
		// Its keys' hashes name other keys here: its global count stands,
		// its keyed counts cannot be placed.
		r.stats.otherKeyHash.Add(1)
		r.errorf(now, &r.lastKeyHashWarn, "a peer hashes keys under another secret: its keyed counts are dropped, so keyed limits are not shared with it. Give every node the same gossip key, or the same WithKeyHashSecret",
			"peer", from, "its key hash", f.KeyHashID, "this node's", r.keyHashID, "dropped so far", r.stats.otherKeyHash.Load())
		f.Keys = f.Keys[:0]
	}
	news := s.totals(f.GlobalSum, f.DemandSum) || f.Global > 0 || len(f.Keys) > 0 || f.Partial
	wasVisible := r.view.heard(p, s, now, f.Leaving, f.Idle, news, relayed, float64(f.Withheld)/wire.WithheldOne)
	// A node decides at most one request a nanosecond, each of at most a
	// bucket of tokens (a larger cost is refused before it is counted).
	s.fair.load.observe(f.GlobalSum, f.DemandSum, now, r.rules.Default().BucketSize)
	// A real peer reports its level clamped to ±B (levelTokens), so a
	// level outside that range is a lie: clamped, it can only claim an
	// emptier replica, which lowers this one by at most a bucket's debt.
	level := min(max(f.Level, -r.rules.Default().BucketSize), r.rules.Default().BucketSize)
	if r.join.contact(now, f.Incarnation, level) && r.onJoinedRunning != nil {
		r.onJoinedRunning(now)
	}
	global := r.globalCharge(s, f, wasVisible)
	if predicted := r.view.takePredicted(p); predicted > 0 && wasVisible {
		// Part of this peer's count was withheld while it was silent: if
		// it was only slow, charge the rest; after a longer silence the
		// withheld share stands for what it admitted (membership.go).
		global -= min(global, int64(predicted))
	}
	charged := uint64(global)
	for _, kc := range f.Keys {
		charged += uint64(kc.Tokens)
	}
	r.stats.tokensCharged.Add(charged)
	at := r.view.bucketTime(now)
	if global > 0 {
		r.word.debit(r.rules.Default(), at, global, r.maxDebt(r.rules.Default()))
	}
	for _, kc := range f.Keys {
		pol := r.rules.ForKey(kc.Key)
		var ent *clusterEntry
		if kc.Tokens > 0 {
			if ent, _, _ = r.keys.Debit(kc.Key, pol, at, kc.Tokens, r.maxDebt(pol)); ent == nil {
				r.stats.keysDropped.Add(1)
			}
		} else {
			ent = r.keys.Lookup(kc.Key)
		}
		if ent != nil && !r.floor {
			r.learnLevel(ent, pol, at, kc.Level)
		}
		r.keyShares.heard(kc.Key, ent, kc.Tokens, kc.Refused, now)
	}
	r.fair.observe(&s.fair, level, now, at)
}

// learnLevel brings this node's replica of a key down to the level a peer
// reports for its own (after the admits of the same frame, just charged
// here), when this one is fuller by more than counts in flight explain. A
// node that joins a running cluster meets a key's first report with a
// full bucket where the peers' are spent; without this it admitted a
// whole bucket more per key and join (a rolling deploy of 5 replicas
// over-admitted a hot key by 9.5%).
//
// The margin, a quarter of the bucket and at least a gossip interval,
// covers what makes a true replica look fuller for a moment: third
// parties' reports still in flight, and the refill while this report
// travelled (80 ms between regions). The replica comes down to the level
// plus a tick's refill: the reports sent around this node's join, resent
// on the next ticks, reach it after this one and are charged again,
// though the level holds them. Lowered to the level exactly, a newcomer
// ended 10 tokens emptier than its peers and got a third less of a hot
// key for seconds; with the tick, every node stays within 16% of the
// cluster's ratio across a rolling deploy, at the cost of at most a
// tick's refill admitted over, per key and join.
func (r *receiver) learnLevel(ent *clusterEntry, rule *bucket.Rule, at bucket.Time, level int64) {
	level = min(max(level, -rule.BucketSize), rule.BucketSize)
	bucket.LowerTo(&ent.tat, rule, at, level*rule.Interval+r.tick, max(rule.Tolerance/4, r.interval), r.maxDebt(rule))
}

// chargeMark is how far the receiver has charged one stream of a peer.
type chargeMark struct {
	// charged is how far into the sender's running total of global admits
	// this node has charged. It moves only by what was charged (or, on a
	// deliberate resync, to a frame's total), never just because a frame
	// claims a larger total: a frame that lies cannot make later, true
	// frames look already charged.
	charged uint64
	synced  bool // charged holds a value
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
func (r *receiver) globalCharge(s *stream, f *wire.Frame, wasVisible bool) int64 {
	rule := r.rules.Default()
	limit := (rule.Tolerance + r.maxDebt(rule)) / rule.Interval // a frame's charge, at most
	charge := func(n uint64) int64 { return int64(min(n, uint64(limit))) }
	m := &s.charge
	resync := func() int64 { m.charged, m.synced = f.GlobalSum, true; return charge(uint64(f.Global)) }
	switch {
	case !m.synced && f.Incarnation+uint64(2*r.interval) >= r.inc:
		m.charged, m.synced = f.GlobalSum, true
		return charge(f.GlobalSum)
	case !m.synced, !wasVisible:
		return resync()
	case f.GlobalSum > m.charged:
		n := charge(f.GlobalSum - m.charged)
		m.charged += uint64(n)
		return n
	case m.charged-f.GlobalSum > r.reorderSlack():
		return resync()
	}
	return 0
}

// reorderSlack is how far below the watermark a true total can arrive: the
// admits of one gossip interval, plus a bucket, are more than frames
// reordered in flight ever differ by.
func (r *receiver) reorderSlack() uint64 {
	rule := r.rules.Default()
	perInterval := uint64(r.interval / rule.Interval)
	return min(uint64(rule.BucketSize)+perInterval, math.MaxUint64/2)
}
