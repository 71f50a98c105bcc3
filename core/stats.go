package gopherpace

import (
	"time"
)

// Stats is a snapshot of a limiter's state and, when clustered, of its
// gossip. Counters only grow.
type Stats struct {
	// Allowed and Denied count the requests this limiter decided, every
	// form and key together (Combine counts an admit on every limit and a
	// denial on the limit that denied; Wait counts its outcome once);
	// TokensAllowed counts the tokens of the allowed ones. Requests shadow
	// mode let through are in ShadowDenials instead.
	Allowed, Denied, TokensAllowed uint64

	// GlobalTokens is the global bucket's balance now: tokens available,
	// or, below zero, the debt that refill must repay first.
	GlobalTokens int64
	// LiveKeys is the number of keyed buckets that are not full now (on
	// the real clock; clustered, the engine's), or hold counts not yet sent
	// to peers. A full bucket may still be held, until its shard next
	// takes a new key, but is not counted: it decides as a missing one.
	LiveKeys int64
	// KeysEvicted counts keyed buckets evicted at the key cap (WithMaxKeys)
	// to make room for new keys: the nearest full of a sample first.
	KeysEvicted uint64

	// Clustered reports whether the limiter has a transport.
	Clustered bool
	// VisibleNodes and KnownNodes count this node and the peers it hears
	// (within 1.5 gossip intervals) and knows (within the grace period).
	VisibleNodes, KnownNodes int64
	// HeardNodes counts this node and the peers whose frames arrived within
	// 1.5 gossip intervals; VisibleNodes also counts peers listed by the
	// transport for under two seconds that have not spoken yet.
	HeardNodes int64
	// Partitioned reports VisibleNodes < KnownNodes.
	Partitioned bool
	// Frames and bytes sent to and received from peers; each broadcast
	// counts once.
	FramesSent, BytesSent, FramesReceived, BytesReceived uint64
	// FramesMalformed counts frames dropped as truncated, oversized,
	// foreign, or from a sender whose start time is implausibly far ahead
	// of this node's clock; FramesDuplicate, repeats and stale frames
	// (and relayed entries that name an incarnation by a tag this node has
	// not heard whole: their totals come again whole);
	// FramesOtherLimiter, frames for a limiter this node does not run on
	// the transport; FramesMissing, sequence numbers from peers that never
	// arrived in any copy (their counts are lost). A datagram that cannot
	// be split into frames counts once, in every limiter on the transport.
	FramesMalformed, FramesDuplicate, FramesOtherLimiter, FramesMissing uint64
	// FramesOtherVersion counts datagrams refused for another wire version:
	// a node of another release in the cluster (logged at WARN, at most
	// every 30 s). Counted in every limiter on the transport.
	FramesOtherVersion uint64
	// DatagramsSent counts the datagrams this node's limiters on the
	// transport sent together: frames that go within a millisecond of one
	// another share one (FramesSent counts this limiter's frames). A
	// broadcast counts once; in a grouped cluster, where datagrams go to
	// one member each, every datagram counts.
	DatagramsSent uint64
	// DatagramsToPeers and BytesToPeers count the same datagrams once per
	// peer each went to, and their bytes: what this node's network
	// interface carries (a broadcast to 99 peers counts 99 times). Shared,
	// like DatagramsSent, by the limiters of a transport.
	DatagramsToPeers, BytesToPeers uint64
	// FramesRelayed counts other nodes' frames this node passed on in a
	// grouped cluster (docs/design.md, "Groups"); RelayDropped, those it
	// could not, for want of room in a backlog of 64 KiB. Shared by the
	// limiters of a transport.
	FramesRelayed, RelayDropped uint64
	// FramesNotMember counts frames from senders the transport does not
	// list as members, dropped unapplied after being held for 2 s in case
	// the sender was a member not listed yet.
	FramesNotMember uint64
	// SendFailures counts this limiter's frames whose datagram the
	// transport refused to send.
	SendFailures uint64
	// TokensReported counts tokens admitted here and sent to peers;
	// TokensCharged, tokens peers reported and this node charged.
	TokensReported, TokensCharged uint64
	// KeysDropped counts peers' keyed counts dropped because this node's
	// store was at its key cap.
	KeysDropped uint64
	// FramesOtherKeyHash counts frames whose keyed counts were dropped
	// because their sender hashes keys under another secret (logged at
	// ERROR, at most every 30 s): the two nodes do not share keyed limits.
	FramesOtherKeyHash uint64
	// HotKeys is how many keys are shared by offered load now: keys that
	// a peer uses while this node's copy holds less than a token
	// (docs/design.md, "A hot key is shared the same way").
	// HotKeysRefused counts the times a key would have become hot while
	// 4,096 were: such a key races for its tokens instead, as accurate in
	// total but not split by offered load.
	HotKeys        int64
	HotKeysRefused uint64

	// ShadowDenials counts the requests that shadow mode (WithShadowMode)
	// let through because the limit denied them.
	ShadowDenials uint64
	// RefundsRefused counts refunds of more tokens than their key can have
	// spent (ErrRefundExceedsSpent).
	RefundsRefused uint64

	// Closed reports that Close was called: the limiter still decides, on
	// its own bucket alone, but has left the cluster.
	Closed bool
}

// Stats returns a snapshot of the limiter's state. Its fields are read one
// after another without stopping the limiter: while decisions are being
// made, a field read later may include decisions that one read earlier
// does not. Every counter only grows, so the difference of two snapshots
// is what happened between them, and a snapshot taken while no call is
// in flight is exact.
func (l *Limiter) Stats() Stats { return l.stats(l.dec.changeTime()) }

// StatsAt is Stats at the given time: the time LiveKeys and GlobalTokens
// are read at, for a limiter whose callers pass their own times (the
// ...At methods), such as a simulation's.
func (l *Limiter) StatsAt(now time.Time) Stats { return l.stats(l.nanos(now)) }

func (l *Limiter) stats(now int64) Stats {
	var s Stats
	at, tat := l.dec.fillStats(&s, now)
	if l.shadow != nil {
		s.ShadowDenials = uint64(l.shadow.denials.Load())
	}
	l.counts.fill(&s)
	s.RefundsRefused = l.refundsRefused.count.Load()
	s.Closed = l.closed.Load()
	rule := l.rules.Default()
	tat = max(tat, int64(at))
	s.GlobalTokens = (int64(at) + rule.Tolerance - tat) / rule.Interval
	if l.leases != nil {
		s.GlobalTokens = min(rule.BucketSize, s.GlobalTokens+l.leases.Leased(at))
	}
	return s
}
