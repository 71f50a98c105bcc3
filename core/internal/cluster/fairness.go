package cluster

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

// Fairness: one bucket from every client's seat.
//
// Every node holds a replica of the global bucket and admits while its own
// replica has tokens; peers charge each admit a few milliseconds later (the
// hold before a flush, plus delivery). Within that delay every node spends
// from its own view, so a node whose replica sits a fraction of a token
// fuller than the others' takes tokens first, again and again: its share of
// the rate grows by (offset ÷ delay), some 170 admits a second per token of
// offset. Offsets never heal on their own (every replica refills and is
// charged alike), so whichever split a restart, a heal or a timing accident
// leaves behind would persist, and a client pinned to the losing replica
// would be refused far more often than one on the winning replica.
//
// So while the cluster's bucket is contended, the race decides only the
// slack. Frames carry the sender's offered load (demandSum: tokens
// requested, admitted or not) beside its admits; every node estimates every
// node's demand rate, and each tick credits itself a share of
// R' × (its demand ÷ the cluster's), where R' is the refill rate in force
// (less the share withheld for peers out of sight). While its replica holds
// less than the gate (a quarter of the bucket), a node admits only what
// its share allows; above the gate, anyone may take tokens, so tokens the
// shares leave unused (after a shift of load, say) are never stranded. The
// replica still bounds every admit: shares only hold tokens back. The split
// then follows offered load, and a request's chance of admission does not
// depend on which replica receives it.
//
// A lying peer can skew the estimates and so the shares, but a share never
// admits anything the bucket does not hold.
//
// fairShares owns this node's share bucket and its offered load, and
// (peerShare) what it keeps of every peer's stream. The share bucket and
// the refusals counted are lock-free (the request path uses them);
// everything else is under the engine's lock, held by the engine's tick
// and receive.
type fairShares struct {
	*engineEnv
	word sharedWord
	view sharesView // the peers in sight, the buckets' clock

	share  shareBucket        // while contended, what this node may admit
	denied bucket.ProcCounter // tokens refused for want of tokens (deniedDemand)

	own load // this node's admit and demand rates; under the engine's lock
	// newcomerUntil is the end of the time in which this node, having
	// joined a running cluster, counts the peers it has not heard yet
	// (rebalance); under the engine's lock.
	newcomerUntil int64
	// pause is the longest pause between this node's asks of late, in
	// ns: each tick's longest, or the previous value less a quarter of
	// it, whichever is longer (shareTolerance); under the engine's lock.
	pause int64
}

// joinedRunning notes that this node has just joined a running cluster.
func (fs *fairShares) joinedRunning(now int64) { fs.newcomerUntil = now + fairWindow }

// peerShare is what fairness keeps of one stream of a peer; under the
// engine's lock.
type peerShare struct {
	load    load         // the sender's admit and demand rates
	offsets offsetWindow // how much fuller this replica is than the sender's
	level   int64        // tokens in the sender's replica, last reported
}

// observe notes a frame's level, with the frame's counts charged at now
// (at on the buckets' clock): this replica and the sender's have then seen
// the same admits but this node's unreported ones (and those in flight),
// so the difference of the levels is their offset.
func (fs *fairShares) observe(ps *peerShare, level, now int64, at bucket.Time) {
	ps.offsets.observe(fs.levelTokens(now)+fs.word.pending()-level, now, at)
	ps.level = level
}

// deniedDemand counts n tokens refused as offered load, unless the refusal
// only waits for the report: the real-clock forms try such a request
// again within milliseconds and count it then, and a wait says nothing
// about the bucket. Counted, the waits of a cold cluster's first burst
// made the idle bucket look contended, and the gate held back the burst's
// last quarter. Lock-free: the request path calls it.
func (fs *fairShares) deniedDemand(n int64, waits bool) {
	if !waits {
		fs.denied.Add(n)
	}
}

// slicing reports whether the share is on and sliced. Lock-free.
func (fs *fairShares) slicing() bool { return fs.share.slicing() }

const (
	// contendedRatio: below this admit ratio the bucket counts as contended.
	contendedRatio = 0.98
	// gateShare: below 1/gateShare of the bucket, admits need share.
	gateShare = 4
	// drainGain is how much the shares grow per gate's worth of stock.
	drainGain = 0.25
	// resyncWindow is how long a replica must stay fuller than a peer's
	// before it lowers itself.
	resyncWindow = int64(150 * time.Millisecond)
)

// shareBucket is what a node may admit from the global bucket while the bucket
// is contended and its replica is below the gate: a small GCRA bucket of
// its own, on the buckets' clock, refilling at this node's share of the
// rate (one token every iv ns) and holding at most tol ns of tokens. A
// request the replica refuses leaves it at most this node's phase of a
// token (rephase), so that shares filled while the replica was empty come
// due at staggered instants, not all at its first refill.
//
// While an even split of the bucket is under sliceBelow tokens (a
// thousand nodes sharing a bucket of a thousand), a share is a fraction
// instead: the node admits that fraction of the tokens it is asked for
// (sliced), by a running credit. Priced as a bucket, a share of a token
// or two a window saved up its token while the replica was empty, and
// every node spent it in the same few milliseconds once the replica
// refilled: the cluster admitted in bursts of a fifth of its bucket, each
// seen by the others only after it landed. The credit holds less than one
// request's tokens, and a request the replica refuses spends it as an
// admit would (forfeit), so nothing is saved up; and it follows requests,
// not time, so a share that moves from tick to tick strands nothing.
type shareBucket struct {
	on   atomic.Bool  // the cluster's bucket is contended
	tat  atomic.Int64 // the share bucket's theoretical arrival time
	iv   atomic.Int64 // ns per share token
	tol  atomic.Int64 // ns of tokens the share bucket holds at most
	gate atomic.Int64 // ns: replica levels below it need share

	sliced atomic.Bool  // the share is a fraction of the tokens asked for
	frac   atomic.Int64 // that fraction, in 1/sliceOne
	credit atomic.Int64 // tokens earned and not spent, in 1/sliceOne

	// lastAsked is when this node last asked for tokens below the gate
	// while contended, admitted or not; longestPause, the longest time
	// between two such asks since the last tick (shareTolerance).
	lastAsked, longestPause atomic.Int64

	phase float64 // this node's place in a share token, in [0, 1): set by init

	// ahead is how far the share's clock runs ahead of the buckets': the
	// lag withheld at once for time already past (peerView.caughtUpLag).
	// That lag charges the replica for what peers heard through relays
	// may have admitted unseen; the shares had already held this node to
	// its part of the rate then, and slowed with it they held the halves
	// of a cut cluster to a third of their rate for half a second.
	ahead atomic.Int64
}

// shareTime is now, on the buckets' clock, on the share's.
func (q *shareBucket) shareTime(now int64) int64 { return now + q.ahead.Load() }

// sliceOne is one token of credit; a fraction of 1/sliceOne is the
// smallest share a sliced share prices.
const sliceOne = 1 << 32

// sliceBelow: shares are sliced while an even split of the bucket is under
// this many tokens. Priced as a bucket, a share of two or three tokens a
// window still saved up its token while the replica was empty (at 300
// nodes sharing 300 a second: admits in clumps of 36 to 53 every 150 ms,
// sliced 10 to 21).
const sliceBelow = 4

// sliceFloor: a share under 1/sliceFloor of an even split is not sliced.
const sliceFloor = 10

// init readies a share: unspent at any time on the buckets' clock (zero
// is a time like any other there, and after a long lag it lay far ahead:
// FuzzReceive), with credit tokens of credit already earned, in
// 1/sliceOne, which is also its phase (rephase): a fraction of a token
// that differs from node to node.
func (q *shareBucket) init(credit int64) {
	q.tat.Store(math.MinInt64 / 4)
	q.credit.Store(credit)
	q.phase = float64(credit) / sliceOne
}

// turn switches the share on (the bucket is contended) or off.
func (q *shareBucket) turn(on bool) { q.on.Store(on) }

// setGate sets the gate for the default rule: a quarter of its bucket.
func (q *shareBucket) setGate(rule *bucket.Rule) {
	q.gate.Store(max(1, rule.BucketSize/gateShare) * rule.Interval)
}

// needed reports whether an admit that takes the bucket's time to next ns
// ahead of now needs share: the bucket is contended, and the admit leaves
// the replica below the gate.
func (q *shareBucket) needed(next, tolerance int64) bool {
	return tolerance-next < q.gate.Load() && q.on.Load()
}

// set prices the share at iv ns per token, holding at most tol ns of
// tokens, at now. When the share has more than doubled, the tokens already
// spent ahead of now are repriced at the new share: a share that was tiny
// when the bucket turned contended (a node whose load had only just begun)
// must not leave seconds of debt behind once its share is known. Smaller
// changes leave the debt as it is, so that the share does not drift with
// every tick's estimate.
func (q *shareBucket) set(iv, tol int64, at bucket.Time) {
	now := q.shareTime(int64(at))
	q.sliced.Store(false)
	old := q.iv.Swap(iv)
	q.tol.Store(tol)
	if old <= 2*iv {
		return
	}
	for {
		tat := q.tat.Load()
		if tat <= now {
			return
		}
		owed := min(saturate(float64(tat-now)/float64(old)*float64(iv), 0, tol), tol)
		if q.tat.CompareAndSwap(tat, now+owed) {
			return
		}
	}
}

// maxShareInterval is the most a share token can cost: a share so small
// (a peer claiming an enormous demand, say) that it stands for no share at
// all. Small enough that every sum of a time, a share's size and a cost
// stays inside int64.
const maxShareInterval = bucket.MaxTolerance / 4

// saturate converts f to an int64 clamped to [lo, hi], NaN giving hi: Go
// leaves out-of-range conversions to the processor (amd64 and arm64
// differ), so the range is checked first and every GOARCH agrees.
func saturate(f float64, lo, hi int64) int64 {
	switch {
	case f != f || f >= float64(hi):
		return hi
	case f <= float64(lo):
		return lo
	}
	return int64(f)
}

// slice prices the share as the fraction frac (0 < frac < 1) of the tokens
// asked for; a refused caller is told to wait iv ns.
func (q *shareBucket) slice(frac float64, iv int64) {
	q.iv.Store(iv)
	q.frac.Store(saturate(math.Round(frac*sliceOne), 1, sliceOne))
	q.sliced.Store(true)
}

// take spends n tokens of share at now. On a denial it returns the wait.
func (q *shareBucket) take(n, now int64) (bool, time.Duration) {
	if q.sliced.Load() {
		return q.takeSlice(n)
	}
	iv, tol := q.iv.Load(), q.tol.Load()
	cost := bucket.CostOf(n, max(iv, 1), tol+iv)
	now = q.shareTime(now)
	for {
		old := q.tat.Load()
		next := max(old, now) + cost
		if next-now > tol {
			return false, time.Duration(next - tol - now)
		}
		if q.tat.CompareAndSwap(old, next) {
			return true, 0
		}
	}
}

// slicing reports whether admits below the gate take a sliced share now.
func (q *shareBucket) slicing() bool { return q.sliced.Load() && q.on.Load() }

// takeSlice earns the credit of n tokens asked for, and spends n tokens of
// credit when it holds them.
func (q *shareBucket) takeSlice(n int64) (bool, time.Duration) {
	cost := bucket.CostOf(n, sliceOne, math.MaxInt64/4)
	earned := bucket.CostOf(n, q.frac.Load(), cost)
	for {
		old := q.credit.Load()
		next := min(old+earned, cost)
		ok := next >= cost
		if ok {
			next -= cost
		}
		if q.credit.CompareAndSwap(old, next) {
			if ok {
				return true, 0
			}
			return false, time.Duration(q.iv.Load())
		}
	}
}

// forfeit is a request the replica refused (below the gate, so one that
// needs share while the bucket is contended); held says its share was
// taken already. A sliced share spends its credit as on an admit, so that
// it saves up nothing while the replica is empty; a share bucket gets
// back what was taken, as the bucket's refill paces it, and one not yet
// taken keeps at most its phase of a token (rephase).
func (q *shareBucket) forfeit(n, now int64, held bool) {
	switch {
	case q.sliced.Load():
		if !held && q.on.Load() {
			q.takeSlice(n)
		}
	case held:
		q.giveBack(n, now)
	case q.on.Load():
		q.asked(now)
		q.rephase(now)
	}
}

// rephase leaves the share at most this node's phase of a token at now
// (on the buckets' clock): every node's requests arriving at the same
// instants, shares full at the refill let every node admit at once, and
// 100 nodes spent clumps of 100 tokens every 175 ms.
func (q *shareBucket) rephase(now int64) {
	floor := q.shareTime(now) + q.tol.Load() - int64(q.phase*float64(q.iv.Load()))
	for {
		old := q.tat.Load()
		if old >= floor || q.tat.CompareAndSwap(old, floor) {
			return
		}
	}
}

// asked notes that this node asked for tokens of the global bucket at now,
// below the gate while contended, and so the longest pause between its
// asks (see shareTolerance); the counted word calls it where it asks for
// share, and forfeit where the replica refuses.
// A pause is measured between asks, not admits: a replica left empty by
// the other nodes is no pause of this node's. Two asks at once may keep
// the shorter of their pauses; the next one long enough is kept again.
func (q *shareBucket) asked(now int64) {
	if q.sliced.Load() { // a sliced share holds nothing over time
		return
	}
	if prev := q.lastAsked.Swap(now); prev > 0 && now-prev > q.longestPause.Load() {
		q.longestPause.Store(now - prev)
	}
}

// shareTolerance is how many ns of tokens a share of share tokens a second,
// one every iv ns, holds: what the node earns in a quarter of a tick (tick,
// ns), or over the longest pause between its asks of late (pause, ns) if
// that is longer, and at least two tokens; never more than a tick's worth,
// so that nothing is saved up from tick to tick.
//
// Why so much: a node on a busy CPU runs in slices, and its requests reach
// the share in clumps. The share earned while the node sat out overflowed a
// share that held a tenth of a tick (5 ms at the default interval), and the
// busiest node, the one most likely starved, lost its share to the idler
// ones: over real memberlist on a loaded 2-core machine it was 6-27% off
// the cluster's admit ratio, with a quarter of the bucket idle, and in the
// simulator a node offered 80% and run in slices of 5-30 ms was 186% off
// (docs/decisions.md, "How much a share holds"). Why not more for every node:
// shares saved up are spent by every node at once when the replica
// refills, before any hears the others; half a tick for every node took
// the worst window from +4 to +16 over R·w + B. The pause raises the share
// only of a node that does pause.
func shareTolerance(share float64, iv, tick, pause int64) int64 {
	span := min(max(tick/4, pause), tick)
	return max(2, saturate(share*float64(span)/float64(time.Second), 0, maxShareInterval)) * iv
}

// pauseSinceTick returns the longest pause between this node's asks since
// the last call, and starts the next measure. While the share is off,
// nothing is asked and nothing measured: the first ask after it turns on
// starts afresh rather than counting the time it was off as a pause.
func (q *shareBucket) pauseSinceTick() int64 {
	if !q.on.Load() {
		q.lastAsked.Store(0)
	}
	return q.longestPause.Swap(0)
}

// room is how many whole tokens of share are left at now.
func (q *shareBucket) room(now int64) int64 {
	if q.sliced.Load() {
		return q.credit.Load() / sliceOne
	}
	iv := q.iv.Load()
	now = q.shareTime(now)
	return (now + q.tol.Load() - max(q.tat.Load(), now)) / iv
}

// giveBack returns n tokens of share taken at now for an admit that did
// not happen.
func (q *shareBucket) giveBack(n, now int64) {
	if q.sliced.Load() {
		q.credit.Add(bucket.CostOf(n, sliceOne, math.MaxInt64/4))
		return
	}
	iv := max(q.iv.Load(), 1)
	cost := bucket.CostOf(n, iv, q.tol.Load()+iv)
	now = q.shareTime(now)
	for {
		old := q.tat.Load()
		if q.tat.CompareAndSwap(old, max(old-cost, now)) {
			return
		}
	}
}

// demandTotal is this node's running total of tokens requested from the
// global bucket: those reported as admitted (reported, the sender's
// running total), those admitted and not yet reported, and those denied.
func (fs *fairShares) demandTotal(reported uint64) uint64 {
	return reported + uint64(max(0, fs.word.pending())) + uint64(fs.denied.Load())
}

// rebalance runs on every tick: it updates this node's estimate of its own
// load (reported is the sender's running total of admits) and credits its
// share for the time since the last tick.
func (fs *fairShares) rebalance(now int64, reported uint64) {
	rule, q := fs.rules.Default(), &fs.share
	q.ahead.Store(fs.view.caughtUpLag())
	fs.pause = max(q.pauseSinceTick(), fs.pause-fs.pause/4)
	// The admits not reported yet count as admits as well as demand: in
	// the demand alone, a tick inside a burst that waits for its report
	// found the bucket contended, and the gate held back the burst's last
	// quarter (TestAFirstBurstThatWaitsForItsReportIsNotGated).
	// Both totals from one read of the unreported count: admits land
	// while the tick runs, and read twice they made demand outrun admits,
	// so a burst with nothing refused looked contended
	// (TestOwnLoadIsReadOnce).
	admitted := reported + uint64(max(0, fs.word.pending()))
	offered := admitted + uint64(fs.denied.Load())
	fs.own.observe(admitted, offered, now, rule.BucketSize)
	a, d, measured := fs.own.rates(now)
	if up := now - fs.startedAt; !measured && up > 0 && up < fairWindow {
		// Just started (a replica of a rolling deploy, say): too soon for
		// the windowed rates, so the totals since the start stand in for
		// them. Without a share a newcomer would race the others freely for
		// its first ticks, and win: +30-70% of its share in its first second.
		secs := float64(up) / float64(time.Second)
		a, d = float64(admitted)/secs, float64(offered)/secs
	}
	admits, demand := a, d
	emptiest := fs.levelTokens(now)
	active := 1 // this node and the active peers in sight
	fs.view.activeInSight(now, func(s *stream) {
		active++
		pa, pd, measured := s.fair.load.rates(now)
		if !measured {
			// Heard too briefly to measure (it, or this node, has just
			// started): taken as loaded like this node. Counting it as
			// idle would hand this node the whole rate, and a replica
			// that restarts in a rolling deploy took 80% of the
			// cluster's admits for its first 200 ms.
			pa, pd = a, d
		}
		admits += pa
		demand += pd
		emptiest = min(emptiest, s.fair.level)
	})
	// A newcomer to a running cluster, for its first fairWindow, takes the
	// listed peers it has not heard yet as offered what it is and as
	// admitting at most their part of the rate: joining a grouped cluster
	// it hears its own group at once, the others through relays a few
	// ticks later. Taken to admit what it admits (all it is offered, in
	// its first ticks), they made a contended cluster look uncontended,
	// and it raced freely until the other groups' reports emptied its
	// replica: 2.5 times its share in its first quarter second (10
	// newcomers to 100 nodes: up to 1.42 of the cluster's ratio over their
	// stay). Not at a cold start, where every node starts at once: there
	// it held shares back from nodes that had not heard each other yet
	// (300 nodes: one at 1.15 of the cluster's ratio, against 1.07).
	if now < fs.newcomerUntil { // checked first: unheard reads every peer
		if n := float64(fs.view.unheard(now)); n > 0 {
			admits += min(a, rule.PerSecond()/float64(max(1, fs.view.knownNodes()))) * n
			demand += d * n
		}
	}
	if fs.floor || demand <= 0 || d <= 0 || admits >= contendedRatio*demand {
		q.on.Store(false)
		return
	}
	// This node's share of the rate. The share runs on the buckets' clock,
	// so while peers are out of sight it slows with the refill by itself.
	// Tokens that every replica in sight holds above empty raise the
	// shares a little, so that stock the shares left unspent (after a shift
	// of load, say) drains instead of idling: a quarter more at the gate,
	// nothing extra at empty. The emptiest replica decides, so every node
	// scales its share alike.
	share := rule.PerSecond() * d / demand
	if emptiest > 0 {
		share *= 1 + drainGain*float64(emptiest*rule.Interval)/float64(q.gate.Load())
	}
	if share <= 0 {
		q.on.Store(false)
		return
	}
	iv := saturate(math.Ceil(float64(time.Second)/share), 1, maxShareInterval)
	if rule.BucketSize < sliceBelow*int64(active) {
		// An even split of the bucket is under sliceBelow tokens: the
		// shares are sliced (see shareBucket), each a fraction of what
		// its node is asked. Decided on the even split, which every node
		// in sight of the same peers works out alike, not on each share:
		// split between the two ways, the shares that saved up their
		// tokens won the refills from those that forfeit theirs (300
		// nodes: one node at 0.24 of the cluster's admit ratio).
		// A refusal waits a token of share, or a window at most: above
		// the gate anyone may take tokens, and a peer that lies about
		// its demand must not tell clients to come back in a month.
		// A share under a tenth of an even split is left off, as below:
		// sliced, it would hold the bottom of the bucket back from
		// everyone (a quarter of a bucket left unspent in the first
		// second of a peer's lie about its demand).
		if share < d && share*float64(sliceFloor*active) >= rule.PerSecond() {
			q.slice(share/d, min(iv, rule.Tolerance))
			q.on.Store(true)
		} else {
			q.on.Store(false)
		}
		return
	}
	if iv > rule.Tolerance {
		// Less than a token a window: this node is offered almost nothing
		// beside the cluster's demand (or a peer claims an absurd demand).
		// Pricing the share would hold back the bottom of the bucket from
		// everyone; without it this node only races for what it is
		// offered, which is next to nothing of the rate when the share is
		// true.
		q.on.Store(false)
		return
	}
	tol := shareTolerance(share, iv, fs.tick, fs.pause)
	q.set(iv, tol, fs.view.bucketTime(now))
	q.on.Store(true)
}

// levelTokens is the tokens left in the replica of the global bucket at now
// on the engine's clock (negative: debt), clamped to ±the bucket size.
func (fs *fairShares) levelTokens(now int64) int64 {
	rule := fs.rules.Default()
	return min(max(fs.globalLevel(now)/rule.Interval, -rule.BucketSize), rule.BucketSize)
}

// offsetWindow keeps the least offset seen from one peer since the window
// started: a replica only counts as fuller than a peer's when it stayed
// fuller for a while, not when counts in flight made it look so once.
type offsetWindow struct {
	least int64
	// leastAt is when the least offset was seen, on the buckets' clock: a
	// resync it justifies charges at that time, so that its debt is repaid
	// one window after the frame at the latest, however late the resync.
	leastAt bucket.Time
	since   int64 // when the window started; 0: empty
	n       int
}

func (w *offsetWindow) observe(offset, now int64, at bucket.Time) {
	if w.n == 0 || offset < w.least {
		w.least, w.leastAt = offset, at
	}
	if w.n == 0 {
		w.since = now
	}
	w.n++
}

func (w *offsetWindow) reset() { *w = offsetWindow{} }

// resync lowers this node's replica of the global bucket toward the
// emptiest replica in sight, when it has been fuller than that one by more
// than the margin for a whole window. Replicas drift apart after
// partitions, restarts and fail-closed spells, and a replica fuller than
// the others by more than the shares can absorb wins every race; lowering
// the fuller one only ever holds tokens back.
func (fs *fairShares) resync(now int64) {
	rule := fs.rules.Default()
	margin := max(2*rule.FlushAt.Load(), int64(float64(fs.share.gate.Load())/float64(rule.Interval)/10))
	excess, at := int64(0), bucket.Time(0)
	ready := false
	fs.view.activeInSight(now, func(s *stream) {
		w := &s.fair.offsets
		if w.n >= 2 && now-w.since >= resyncWindow {
			ready = true
			if w.least-margin > excess {
				excess, at = w.least-margin, w.leastAt
			}
		}
	})
	if !ready {
		return
	}
	if excess > 0 && !fs.floor {
		// Charged at the time of the frame that showed the offset: the
		// debt, capped there, ends a window after that frame even when the
		// member fell silent before the window closed (docs/security.md).
		fs.word.debit(rule, at, excess, fs.maxDebt(rule))
	}
	fs.view.eachStream(func(s *stream) { s.fair.offsets.reset() })
}

// globalLevel is how far (in ns) the replica of the global bucket is from
// empty at now on the engine's clock: positive while it holds tokens.
func (fs *fairShares) globalLevel(now int64) int64 {
	b := fs.view.bucketTime(now)
	tat, ok := fs.word.tat(fs.rules.Default(), b)
	if !ok {
		return 0
	}
	return fs.rules.Default().Tolerance - (tat - int64(b))
}
