package gopherpace

import (
	"math"
	"sync/atomic"
	"time"
)

// This file holds every operation on a plain bucket word: an atomic int64
// holding a GCRA theoretical arrival time (TAT) in nanoseconds since the
// limiter's epoch. The bucket is full whenever tat <= now. Standalone global
// buckets and every keyed bucket use it; the clustered global bucket uses
// the counted word (counted_word.go), and leases their own slots (lease.go).

// bucket is one plain word, padded to a cache line so that two hot buckets
// never share one.
type bucket struct {
	tat atomic.Int64
	_   [56]byte
}

func (b *bucket) init() { b.tat.Store(neverUsed) }

// handOver marks the standalone global bucket while a clustered engine
// holds the global state, until Close hands it back.
func (b *bucket) handOver() { b.tat.Store(evicted) }

// neverUsed is the state of a bucket that has not spent a token yet: a
// theoretical arrival time so far in the past that the bucket is full at any
// time a caller may pass, even one before the limiter was created.
const neverUsed = math.MinInt64 / 4

// evicted marks a keyed bucket that the store has removed; a taker that sees
// it looks the key up again.
const evicted = math.MinInt64

// reread loads w for another compare-and-swap after one lost a race. It is
// a locked add of zero rather than a load: the add takes the cache line
// exclusive, so the next compare-and-swap does not have to upgrade it from
// shared (one transfer between cores, not two). Every contended loop on a
// bucket word reads through it.
func reread(w *atomic.Int64) int64 { return w.Add(0) }

// rereadCounted is reread for a counted or lease word.
func rereadCounted(w *atomic.Uint64) uint64 { return w.Add(0) }

// Times are nanoseconds since the limiter's epoch, clamped to ±maxNow so
// that every sum of a time, a tolerance and a cost stays inside int64 and
// clear of the marks above.
const maxNow = int64(1) << 62

// A bucketTime is a time on the buckets' clock, which every bucket, lease
// and store operation takes. Standalone it is the limiter's time (int64
// nanoseconds since the epoch, the caller's time.Time converted once);
// clustered it is that time less the lag built up while peers were out of
// sight (peerView.bucketTime). Its own type keeps the three times apart:
// a limiter time passed where a bucket time is due does not compile.
type bucketTime int64

// takeInto tries to spend n (at most the bucket size) tokens at now,
// writing the Decision into d: a Decision is six words, and copying it up
// through every caller costs more than deciding. It never spends on a
// denial, and it returns false, without deciding, when the word was evicted
// under it.
func takeInto(d *Decision, tat *atomic.Int64, rule *rule, at bucketTime, n int64) (ok bool) {
	now := int64(at)
	unit := rule.interval
	cost := n * unit
	old := tat.Load()
	for {
		if old == evicted {
			return false
		}
		base := max(old, now)
		next := base + cost
		if next-now > rule.tolerance {
			rule.fillDenied(d, base, now, next, unit)
			settle(tat, rule, old, at)
			return true
		}
		if tat.CompareAndSwap(old, next) {
			rule.fillAllowed(d, next, now, unit)
			return true
		}
		old = reread(tat)
	}
}

// reserve spends n tokens at now if they are due within within ns past
// the time they would be free (a take's limit, plus within), and returns
// how far past now they are due: 0 when they are there now. It never
// spends on a refusal, whose wait it also returns; alive is false, without
// deciding, when the word was evicted under it.
func reserve(tat *atomic.Int64, rule *rule, at bucketTime, n, within int64) (wait int64, ok, alive bool) {
	now := int64(at)
	cost := n * rule.interval
	old := tat.Load()
	for {
		if old == evicted {
			return 0, false, false
		}
		next := max(old, now) + cost
		if next-now > rule.tolerance+within {
			settle(tat, rule, old, at)
			return next - rule.tolerance - now, false, true
		}
		if tat.CompareAndSwap(old, next) {
			return max(next-rule.tolerance-now, 0), true, true
		}
		old = reread(tat)
	}
}

// allow is takeInto for callers that need only the verdict and the retry
// delay: it skips the divisions that fill a Decision. The word must never
// be evicted (the global bucket). contended reports that a compare-and-swap
// lost a race.
func allow(tat *atomic.Int64, rule *rule, at bucketTime, n int64) (ok bool, retry time.Duration, contended bool) {
	now := int64(at)
	cost := n * rule.interval
	old := tat.Load()
	for {
		next := max(old, now) + cost
		if next-now > rule.tolerance {
			settle(tat, rule, old, at)
			return false, time.Duration(next - rule.tolerance - now), contended
		}
		if tat.CompareAndSwap(old, next) {
			return true, 0, contended
		}
		contended = true
		old = reread(tat)
	}
}

// settle handles a TAT more than a window beyond the rule's ceiling (and
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
func settle(tat *atomic.Int64, rule *rule, old int64, at bucketTime) {
	now := int64(at)
	if old != evicted && old-now > max(rule.ceiling, rule.tolerance+rule.reach)+rule.tolerance {
		tat.CompareAndSwap(old, now+rule.ceiling)
	}
}

// takeUpTo spends as many tokens as the bucket holds, up to n, in one
// compare-and-swap, for a lease. On a denial (got 0) it returns the wait
// for one token.
func takeUpTo(tat *atomic.Int64, rule *rule, at bucketTime, n int64) (got int64, retry time.Duration, contended bool) {
	now := int64(at)
	unit := rule.interval
	old := tat.Load()
	for {
		base := max(old, now)
		got = min(n, rule.tokensIn(now+rule.tolerance-base, unit))
		if got < 1 {
			return 0, time.Duration(base + unit - rule.tolerance - now), contended
		}
		if tat.CompareAndSwap(old, base+got*unit) {
			return got, 0, contended
		}
		contended = true
		old = reread(tat)
	}
}

// refund gives n tokens back, never filling the bucket past full.
func refund(tat *atomic.Int64, rule *rule, at bucketTime, n int64) (ok bool) {
	now := int64(at)
	if n < 1 {
		return true
	}
	cost := costOf(n, rule.interval, rule.ceiling)
	for {
		old := tat.Load()
		if old == evicted {
			return true
		}
		if !refundable(rule, max(old-now, 0), n) {
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

// refundable reports whether a bucket whose TAT runs ahead of now by
// ahead can have spent n tokens within its window: no more than it still
// owes and one bucket besides (what refill repaid meanwhile). A refund of
// more gives back tokens nobody spent: a bug or an attack, refused whole.
func refundable(rule *rule, ahead, n int64) bool {
	return n <= rule.bucketSize || n-rule.bucketSize <= ahead/rule.interval
}

// debit charges n tokens that a peer admitted. Unlike a local take it always
// lands, carrying the bucket into debt, so that load spread over many nodes
// adds up; the debt is capped at maxDebt beyond empty, so that a burst of
// stale counts (after a partition heals, say) cannot stall the bucket for
// long. maxDebt 0 is the reference design's floor at zero. A count of any
// size only ever spends: the cost saturates, and n < 1 charges nothing.
// It returns the tokens it spent (fewer than n where the cap cut the
// charge) and how far ahead of now the word's time is after it.
func debit(tat *atomic.Int64, rule *rule, at bucketTime, n, maxDebt int64) (charged, ahead int64) {
	now := int64(at)
	if n < 1 {
		return 0, max(tat.Load()-now, 0)
	}
	cost := costOf(n, rule.interval, rule.tolerance+maxDebt)
	limit := now + rule.tolerance + maxDebt
	for {
		old := tat.Load()
		if old == evicted {
			return 0, 0
		}
		if old >= limit {
			return 0, old - now
		}
		next := min(max(old, now)+cost, limit)
		if tat.CompareAndSwap(old, next) {
			return chargedOf(n, next-max(old, now), cost, rule.interval), next - now
		}
	}
}

// wordLevel is how far a plain word is from empty at at, in ns of tokens
// (negative: debt); a word evicted for being full is full.
func wordLevel(tat *atomic.Int64, rule *rule, at bucketTime) int64 {
	t := tat.Load()
	if t == evicted {
		return rule.tolerance
	}
	return rule.tolerance - max(t-int64(at), 0)
}

// lowerTo brings a plain word down to level ns of tokens when it holds
// more than that by over margin ns; it never raises one, and never below a
// bucket of debt (maxDebt ns), the most any frame may charge.
func lowerTo(tat *atomic.Int64, rule *rule, at bucketTime, level, margin, maxDebt int64) {
	now := int64(at)
	target := now + rule.tolerance - max(level, -maxDebt)
	for {
		old := tat.Load()
		if old == evicted || max(old, now) >= target-margin {
			return
		}
		if tat.CompareAndSwap(old, target) {
			return
		}
	}
}

// refill makes a plain word full at any time, unless the store has evicted
// it (a missing key is full anyway).
func refill(tat *atomic.Int64) {
	for old := tat.Load(); old != evicted && !tat.CompareAndSwap(old, neverUsed); old = reread(tat) {
	}
}
