package bucket

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// This file holds every operation on a plain bucket word: an atomic int64
// holding a GCRA theoretical arrival time (TAT) in nanoseconds since the
// limiter's epoch. The bucket is full whenever tat <= now. Standalone global
// buckets and every keyed bucket use it; the clustered global bucket uses
// the counted word (internal/cluster's counted_word.go), and leases their own slots (lease.go).

// Plain is one plain word, padded to a cache line so that two hot buckets
// never share one.
type Plain struct {
	TAT atomic.Int64
	_   [56]byte
}

func (b *Plain) Init() { b.TAT.Store(NeverUsed) }

// HandOver marks the standalone global bucket while a clustered engine
// holds the global state, until Close hands it back.
func (b *Plain) HandOver() { b.TAT.Store(Evicted) }

// NeverUsed is the state of a bucket that has not spent a token yet: a
// theoretical arrival time so far in the past that the bucket is full at any
// time a caller may pass, even one before the limiter was created.
const NeverUsed = math.MinInt64 / 4

// Evicted marks a keyed bucket that the store has removed; a taker that sees
// it looks the key up again.
const Evicted = math.MinInt64

// Reread loads w for another compare-and-swap after one lost a race. It is
// a locked add of zero rather than a load: the add takes the cache line
// exclusive, so the next compare-and-swap does not have to upgrade it from
// shared (one transfer between cores, not two). Every contended loop on a
// bucket word reads through it.
func Reread(w *atomic.Int64) int64 { return w.Add(0) }

// RereadCounted is reread for a counted or lease word.
func RereadCounted(w *atomic.Uint64) uint64 { return w.Add(0) }

// Times are nanoseconds since the limiter's epoch, clamped to ±MaxNow so
// that every sum of a time, a tolerance and a cost stays inside int64 and
// clear of the marks above.
const MaxNow = int64(1) << 62

// A Time is a time on the buckets' clock, which every bucket, lease
// and store operation takes. Standalone it is the limiter's time (int64
// nanoseconds since the epoch, the caller's time.Time converted once);
// clustered it is that time less the lag built up while peers were out of
// sight (peerView.Time). Its own type keeps the three times apart:
// a limiter time passed where a bucket time is due does not compile.
type Time int64

// StandaloneTime is a limiter's time now as a time on a standalone word's
// clock, which has no lag: the standalone decider's, and the word a
// clustered limiter hands its global bucket back to on Close.
func StandaloneTime(now int64) Time { return Time(now) }

// ClampNanos is d, a time since a limiter's epoch, as a limiter time:
// clamped to ±MaxNow.
func ClampNanos(d time.Duration) int64 { return min(max(int64(d), -MaxNow), MaxNow) }

// TakeInto tries to spend n (at most the bucket size) tokens at now,
// writing the Decision into d: a Decision is six words, and copying it up
// through every caller costs more than deciding. It never spends on a
// denial, and it returns false, without deciding, when the word was evicted
// under it.
func TakeInto(d *render.Decision, tat *atomic.Int64, rule *Rule, at Time, n int64) (ok bool) {
	now := int64(at)
	unit := rule.Interval
	cost := n * unit
	old := tat.Load()
	for {
		if old == Evicted {
			return false
		}
		base := max(old, now)
		next := base + cost
		if next-now > rule.Tolerance {
			rule.FillDenied(d, base, now, next, unit)
			Settle(tat, rule, old, at)
			return true
		}
		if tat.CompareAndSwap(old, next) {
			rule.FillAllowed(d, next, now, unit)
			return true
		}
		old = Reread(tat)
	}
}

// Reserve spends n tokens at now if they are due within within ns past
// the time they would be free (a take's limit, plus within), and returns
// how far past now they are due: 0 when they are there now. It never
// spends on a refusal, whose wait it also returns; alive is false, without
// deciding, when the word was evicted under it.
func Reserve(tat *atomic.Int64, rule *Rule, at Time, n, within int64) (wait int64, ok, alive bool) {
	now := int64(at)
	cost := n * rule.Interval
	old := tat.Load()
	for {
		if old == Evicted {
			return 0, false, false
		}
		next := max(old, now) + cost
		if next-now > rule.Tolerance+within {
			Settle(tat, rule, old, at)
			return next - rule.Tolerance - now, false, true
		}
		if tat.CompareAndSwap(old, next) {
			return max(next-rule.Tolerance-now, 0), true, true
		}
		old = Reread(tat)
	}
}

// Allow is TakeInto for callers that need only the verdict and the retry
// delay: it skips the divisions that fill a Decision. The word must never
// be evicted (the global bucket). contended reports that a compare-and-swap
// lost a race.
func Allow(tat *atomic.Int64, rule *Rule, at Time, n int64) (ok bool, retry time.Duration, contended bool) {
	now := int64(at)
	cost := n * rule.Interval
	old := tat.Load()
	for {
		next := max(old, now) + cost
		if next-now > rule.Tolerance {
			Settle(tat, rule, old, at)
			return false, time.Duration(next - rule.Tolerance - now), contended
		}
		if tat.CompareAndSwap(old, next) {
			return true, 0, contended
		}
		contended = true
		old = Reread(tat)
	}
}

// Settle handles a TAT more than a window beyond the rule's ceiling (and
// the reach of bookings, which may run further ahead), on
// the denial path. Only a caller's time that jumped back by over a window
// (or a call far in the future) leaves one; left alone, it would deny
// every caller until the clock caught up with it, perhaps for years. A
// jump that large is taken for a broken clock: the bucket restarts at the
// ceiling, as empty as any history allows, and refills from the new time.
// A smaller step back changes nothing, so it never admits extra. After a
// larger one the bucket refills again over times it had already passed, so
// the bound is B + R·(the distance the caller's time moved forward in all),
// not R times the span of times passed: a single word cannot remember what
// was spent at times it has forgotten (FuzzBucketNeverExceedsRate).
func Settle(tat *atomic.Int64, rule *Rule, old int64, at Time) {
	now := int64(at)
	if old != Evicted && old-now > rule.SettleBeyond() {
		tat.CompareAndSwap(old, now+rule.Ceiling)
	}
}

// takeUpTo spends as many tokens as the bucket holds, up to n, in one
// compare-and-swap, for a lease. On a denial (got 0) it returns the wait
// for one token.
func takeUpTo(tat *atomic.Int64, rule *Rule, at Time, n int64) (got int64, retry time.Duration, contended bool) {
	now := int64(at)
	unit := rule.Interval
	old := tat.Load()
	for {
		base := max(old, now)
		got = min(n, rule.TokensIn(now+rule.Tolerance-base, unit))
		if got < 1 {
			return 0, time.Duration(base + unit - rule.Tolerance - now), contended
		}
		if tat.CompareAndSwap(old, base+got*unit) {
			return got, 0, contended
		}
		contended = true
		old = Reread(tat)
	}
}

// Refund gives n tokens back, never filling the bucket past full.
func Refund(tat *atomic.Int64, rule *Rule, at Time, n int64) (ok bool) {
	now := int64(at)
	if n < 1 {
		return true
	}
	cost := CostOf(n, rule.Interval, rule.Ceiling)
	for {
		old := tat.Load()
		if old == Evicted {
			return true
		}
		if !Refundable(rule, max(old-now, 0), n) {
			return false
		}
		if old <= now {
			return true
		}
		next := max(old-cost, now)
		if tat.CompareAndSwap(old, next) {
			return true
		}
	}
}

// Refundable reports whether a bucket whose TAT runs ahead of now by
// ahead can have spent n tokens within its window: no more than it still
// owes and one bucket besides (what refill repaid meanwhile). A refund of
// more gives back tokens nobody spent: a bug or an attack, refused whole.
func Refundable(rule *Rule, ahead, n int64) bool {
	return n <= rule.BucketSize || n-rule.BucketSize <= ahead/rule.Interval
}

// Debit charges n tokens that a peer admitted. Unlike a local take it always
// lands, carrying the bucket into debt, so that load spread over many nodes
// adds up; the debt is capped at maxDebt beyond empty, so that a burst of
// stale counts (after a partition heals, say) cannot stall the bucket for
// long. maxDebt 0 is the reference design's floor at zero. A count of any
// size only ever spends: the cost saturates, and n < 1 charges nothing.
// It returns the tokens it spent (fewer than n where the cap cut the
// charge) and how far ahead of now the word's time is after it.
func Debit(tat *atomic.Int64, rule *Rule, at Time, n, maxDebt int64) (charged, ahead int64) {
	now := int64(at)
	if n < 1 {
		return 0, max(tat.Load()-now, 0)
	}
	cost := CostOf(n, rule.Interval, rule.Tolerance+maxDebt)
	limit := now + rule.Tolerance + maxDebt
	for {
		old := tat.Load()
		if old == Evicted {
			return 0, 0
		}
		if old >= limit {
			return 0, old - now
		}
		next := min(max(old, now)+cost, limit)
		if tat.CompareAndSwap(old, next) {
			return ChargedOf(n, next-max(old, now), cost, rule.Interval), next - now
		}
	}
}

// Level is how far a plain word is from empty at at, in ns of tokens
// (negative: debt); a word evicted for being full is full.
func Level(tat *atomic.Int64, rule *Rule, at Time) int64 {
	t := tat.Load()
	if t == Evicted {
		return rule.Tolerance
	}
	return rule.Tolerance - max(t-int64(at), 0)
}

// LowerTo brings a plain word down to level ns of tokens when it holds
// more than that by over margin ns; it never raises one, and never below a
// bucket of debt (maxDebt ns), the most any frame may charge.
func LowerTo(tat *atomic.Int64, rule *Rule, at Time, level, margin, maxDebt int64) {
	now := int64(at)
	target := now + rule.Tolerance - max(level, -maxDebt)
	for {
		old := tat.Load()
		if old == Evicted || max(old, now) >= target-margin {
			return
		}
		if tat.CompareAndSwap(old, target) {
			return
		}
	}
}

// Refill makes a plain word full at any time, unless the store has evicted
// it (a missing key is full anyway).
func Refill(tat *atomic.Int64) {
	for old := tat.Load(); old != Evicted && !tat.CompareAndSwap(old, NeverUsed); old = Reread(tat) {
	}
}
