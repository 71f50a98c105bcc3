package cluster

import (
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// This file holds every operation on a counted word, the clustered global
// bucket's state.

// countedWord is the global bucket of a clustered limiter. One word holds
// both the theoretical arrival time (TAT) and the count of tokens this node
// admitted that its peers have not been told of yet, so counting an admit for
// gossip rides in the compare-and-swap that spends it. A clustered Allow then
// costs one atomic write, like a standalone one.
//
// The word is tat<<countBits | count. It keeps the time's low 58 bits and
// reads them back relative to now, which is exact while the time lies within
// ±2^57 ns (4.5 years) of now. Both sides stay far inside that range:
//   - ahead of now, a clustered bucket's time is at most its window plus
//     one window of debt, and New caps that window at MaxTolerance;
//   - behind now, the engine's ticks move an idle bucket's time up to
//     2^50 ns (13 days) behind now (the bucket is full either way).
//
// A time read back as further behind than staleAhead can only be a
// caller's clock far off the engine's; it counts as an empty bucket, which
// denies rather than admits.
//
// A count that outgrows the word's field spills into spill, once every
// countMax tokens.
type countedWord struct {
	word  atomic.Uint64
	spill atomic.Int64
	// inflight counts tokens reported within the last reportFlight: the
	// peers may not have them yet, so they still count against the cap on
	// what this node admits unheard (decide_clustered.go). It shares the cache line
	// that the lean path reads anyway.
	inflight atomic.Int64
	_        [40]byte
}

const (
	countBits = 6
	countMask = 1<<countBits - 1
	// countMax is the largest count the word holds.
	countMax = countMask - 1
	// handedBack is the count field of a word whose state moved to the
	// standalone bucket when the limiter closed.
	handedBack = countMask
	// MaxTolerance caps a clustered global bucket's window (about
	// 417 days), so that time plus debt never nears the word's range.
	MaxTolerance = int64(1) << 55
	staleAhead   = -int64(1) << 56
	// idleAhead is as far behind now as a drain leaves a full bucket's time:
	// readable for sure, and still full for callers whose clocks lag the
	// engine's by up to 13 days, as a never-used bucket would be.
	idleAhead = -int64(1) << 50
)

func packCounted(tat, count int64) uint64 { return uint64(tat)<<countBits | uint64(count) }

// addCount is the count field after adding n to unsent, and what moves to
// spill: a count that would not fit the field moves there whole.
func addCount(unsent, n int64) (keep, moved int64) {
	if unsent+n > countMax {
		return 0, unsent + n
	}
	return unsent + n, 0
}

// unreportedAfter is the unreported count once an admit that left keep in
// the field and moved moved has landed.
func (c *countedWord) unreportedAfter(keep, moved int64) int64 {
	if moved > 0 {
		return c.spill.Add(moved)
	}
	return keep + c.spill.Load()
}

// ahead reads a word's time back as its distance ahead of now.
func ahead(w uint64, at bucket.Time) int64 { return int64(w-uint64(at)<<countBits) >> countBits }

// readAhead is ahead, except that a time that cannot be read (see
// staleAhead) reads as a whole window ahead: an empty bucket.
func readAhead(w uint64, at bucket.Time, rule *bucket.Rule) int64 {
	if a := ahead(w, at); a >= staleAhead {
		return a
	}
	return rule.Tolerance
}

// spent is how far ahead of now the bucket's time is, 0 for a full bucket.
func spent(w uint64, at bucket.Time, rule *bucket.Rule) int64 { return max(readAhead(w, at, rule), 0) }

func (c *countedWord) init(at bucket.Time) {
	now := int64(at)
	// Full at any time a caller may pass, even a little before the limiter
	// was created.
	c.word.Store(packCounted(now-MaxTolerance, 0))
}

// unreported is the count of tokens admitted and not yet drained, for a
// word read at w.
func (c *countedWord) unreported(w uint64) int64 {
	return int64(w&countMask) + c.spill.Load()
}

// pending is the count of tokens admitted and not yet drained, now.
func (c *countedWord) pending() int64 { return c.unreported(c.word.Load()) }

// addInflight counts n tokens reported and not yet surely heard (n < 0:
// heard, reportFlight later). Lock-free.
func (c *countedWord) addInflight(n int64) { c.inflight.Add(n) }

// unheard is the count of tokens admitted that the peers may not have yet:
// not reported, or reported within the last reportFlight.
func (c *countedWord) unheard() int64 { return c.pending() + c.inflight.Load() }

// allow spends one token on the lean path. fast is false when the caller
// must take the general path instead: the word was handed back, or the node
// has reached its cap of unreported tokens. On an admit, count is the
// unreported count after it. contended reports that a compare-and-swap lost
// a race.
//
// While the bucket is contended, an admit that leaves the replica below the
// gate also spends this node's share q (fairness.go).
func (c *countedWord) allow(rule *bucket.Rule, at bucket.Time, q *shareBucket) (ok bool, retry time.Duration, count int64, fast, contended bool) {
	now := int64(at)
	w := c.word.Load()
	spill := c.spill.Load()
	cost := rule.Interval
	quotaHeld := false
	for {
		n := int64(w & countMask)
		if n == handedBack || n+spill+c.inflight.Load() >= rule.LocalCap.Load() {
			if quotaHeld {
				q.giveBack(1, now)
			}
			return false, 0, 0, false, contended
		}
		base := spent(w, at, rule)
		next := base + cost
		if next > rule.Tolerance {
			q.forfeit(1, now, quotaHeld)
			c.settle(w, rule, base, at)
			return false, time.Duration(next - rule.Tolerance), 0, true, contended
		}
		if !quotaHeld && q.needed(next, rule.Tolerance) {
			q.asked(now)
			if ok, wait := q.take(1, now); !ok {
				return false, wait, 0, true, contended
			}
			quotaHeld = true
		}
		keep, moved := addCount(n, 1)
		if c.word.CompareAndSwap(w, packCounted(now+next, keep)) {
			if moved > 0 {
				return true, 0, c.spill.Add(moved), true, contended
			}
			return true, 0, keep + spill, true, contended
		}
		contended = true
		w = bucket.RereadCounted(&c.word)
	}
}

// take spends n tokens at now and counts them, deciding into d. It returns,
// on an admit, the unreported count after it; ok is false when the word was
// handed back. q is the share, as for allow.
func (c *countedWord) take(d *render.Decision, rule *bucket.Rule, at bucket.Time, n int64, q *shareBucket) (count int64, ok bool) {
	now := int64(at)
	unit := rule.Interval
	cost := n * unit
	w := c.word.Load()
	quotaHeld := false
	for {
		unsent := int64(w & countMask)
		if unsent == handedBack {
			if quotaHeld {
				q.giveBack(n, now)
			}
			return 0, false
		}
		base := spent(w, at, rule)
		next := base + cost
		if next > rule.Tolerance {
			q.forfeit(n, now, quotaHeld)
			rule.FillDenied(d, now+base, now, now+next, unit)
			c.settle(w, rule, base, at)
			return 0, true
		}
		if !quotaHeld && q.needed(next, rule.Tolerance) {
			q.asked(now)
			if ok, wait := q.take(n, now); !ok {
				rule.FillDenied(d, now+base, now, now+next, unit)
				d.RetryAfter = max(d.RetryAfter, wait)
				return 0, true
			}
			quotaHeld = true
		}
		keep, moved := addCount(unsent, n)
		if c.word.CompareAndSwap(w, packCounted(now+next, keep)) {
			rule.FillAllowed(d, now+next, now, unit)
			return c.unreportedAfter(keep, moved), true
		}
		w = bucket.RereadCounted(&c.word)
	}
}

// settle is bucket.Settle for the counted word w, whose time is
// ahead ahead of now.
func (c *countedWord) settle(w uint64, rule *bucket.Rule, ahead int64, at bucket.Time) {
	now := int64(at)
	if ahead > rule.SettleBeyond() {
		c.word.CompareAndSwap(w, packCounted(now+rule.Ceiling, int64(w&countMask)))
	}
}

// takeUpTo spends as many tokens as the bucket holds, up to n and up to
// room more unreported tokens, in one compare-and-swap, and counts them. On
// a denial (got 0) retry is the wait for one token; ok is false when the
// word was handed back. q is the share, as for allow: while it applies, a
// lease takes no more than the share left.
func (c *countedWord) takeUpTo(rule *bucket.Rule, at bucket.Time, n, room int64, q *shareBucket) (got, count int64, retry time.Duration, contended, ok bool) {
	now := int64(at)
	unit := rule.Interval
	w := c.word.Load()
	for {
		unsent := int64(w & countMask)
		if unsent == handedBack {
			return 0, 0, 0, contended, false
		}
		base := spent(w, at, rule)
		got = min(n, room, (rule.Tolerance-base)/unit)
		if got < 1 {
			return 0, 0, time.Duration(base + unit - rule.Tolerance), contended, true
		}
		quotaHeld := int64(0)
		if q.needed(base+got*unit, rule.Tolerance) {
			q.asked(now)
			got = min(got, q.room(now))
			if got < 1 {
				_, wait := q.take(1, now)
				return 0, 0, wait, contended, true
			}
			if ok, wait := q.take(got, now); !ok {
				return 0, 0, wait, contended, true
			}
			quotaHeld = got
		}
		keep, moved := addCount(unsent, got)
		if c.word.CompareAndSwap(w, packCounted(now+base+got*unit, keep)) {
			return got, c.unreportedAfter(keep, moved), 0, contended, true
		}
		if quotaHeld > 0 {
			q.giveBack(quotaHeld, now)
		}
		contended = true
		w = bucket.RereadCounted(&c.word)
	}
}

// update applies f to the time ahead of now (negative for a full bucket)
// and the count of the word, in one compare-and-swap, unless the word was
// handed back. Like the plain word's operations, f leaves a full bucket's
// time alone unless it spends: a caller whose time runs a little behind
// must still find the bucket full.
func (c *countedWord) update(at bucket.Time, rule *bucket.Rule, f func(ahead, count int64) (int64, int64)) (applied bool) {
	now := int64(at)
	for {
		w := c.word.Load()
		unsent := int64(w & countMask)
		if unsent == handedBack {
			return false
		}
		a, n := f(readAhead(w, at, rule), unsent)
		if c.word.CompareAndSwap(w, packCounted(now+a, n)) {
			return true
		}
	}
}

// debit charges n tokens that a peer admitted, as debit in bucket.go does.
func (c *countedWord) debit(rule *bucket.Rule, at bucket.Time, n, maxDebt int64) {
	if n < 1 {
		return
	}
	cost := bucket.CostOf(n, rule.Interval, rule.Tolerance+maxDebt)
	c.update(at, rule, func(a, count int64) (int64, int64) {
		if a >= rule.Tolerance+maxDebt {
			return a, count
		}
		return min(max(a, 0)+cost, rule.Tolerance+maxDebt), count
	})
}

// reserve is reserve in bucket.go for the counted word, counting what it
// spends for gossip in the same compare-and-swap: it returns the
// unreported count after an admit; alive is false when the word was
// handed back.
func (c *countedWord) reserve(rule *bucket.Rule, at bucket.Time, n, within int64) (wait, count int64, ok, alive bool) {
	now := int64(at)
	cost := n * rule.Interval
	w := c.word.Load()
	for {
		unsent := int64(w & countMask)
		if unsent == handedBack {
			return 0, 0, false, false
		}
		base := spent(w, at, rule)
		next := base + cost
		if next > rule.Tolerance+within {
			c.settle(w, rule, base, at)
			return next - rule.Tolerance, 0, false, true
		}
		keep, moved := addCount(unsent, n)
		if c.word.CompareAndSwap(w, packCounted(now+next, keep)) {
			return max(next-rule.Tolerance, 0), c.unreportedAfter(keep, moved), true, true
		}
		w = bucket.RereadCounted(&c.word)
	}
}

// charge spends n tokens whether or not the bucket holds them, never
// taking it past maxDebt beyond empty, and counts what it spent for gossip
// in the same compare-and-swap. It returns the tokens spent, the
// unreported count after them and how far ahead of now the bucket's time
// is; ok is false when the word was handed back.
func (c *countedWord) charge(rule *bucket.Rule, at bucket.Time, n, maxDebt int64) (charged, count, ahead int64, ok bool) {
	now := int64(at)
	limit := rule.Tolerance + maxDebt
	cost := bucket.CostOf(n, rule.Interval, limit)
	for {
		w := c.word.Load()
		unsent := int64(w & countMask)
		if unsent == handedBack {
			return 0, 0, 0, false
		}
		a := readAhead(w, at, rule)
		if a >= limit {
			return 0, c.unreported(w), a, true
		}
		base := max(a, 0)
		next := min(base+cost, limit)
		charged = bucket.ChargedOf(n, next-base, cost, rule.Interval)
		keep, moved := addCount(unsent, charged)
		if c.word.CompareAndSwap(w, packCounted(now+next, keep)) {
			return charged, c.unreportedAfter(keep, moved), next, true
		}
	}
}

// reset makes the bucket full at now, keeping the unreported count; false
// when the word was handed back (the limiter is closing).
func (c *countedWord) reset(rule *bucket.Rule, at bucket.Time) bool {
	if c.word.Load()&countMask == handedBack {
		return false
	}
	c.update(at, rule, func(_, count int64) (int64, int64) { return 0, count })
	return true
}

// reprice moves the bucket from one rule to another at now, keeping the
// tokens it has spent (core's setrate.go).
func (c *countedWord) reprice(from, to *bucket.Rule, at bucket.Time) {
	c.update(at, from, func(a, count int64) (int64, int64) {
		if a <= 0 {
			return a, count
		}
		return bucket.Repriced(a, from, to), count
	})
}

// bucket.LowerTo spends the tokens above level (0..B), for a node that joined a
// running cluster whose replicas hold level tokens.
func (c *countedWord) lowerTo(rule *bucket.Rule, at bucket.Time, level int64) {
	target := rule.Tolerance - min(max(level, 0), rule.BucketSize)*rule.Interval
	c.update(at, rule, func(a, count int64) (int64, int64) { return max(a, target), count })
}

// refund gives back n tokens, never past full, and takes up to n of them
// out of the unreported count; a refund of more than the bucket can have
// spent within its window (refundable) is refused whole: refused reports
// it. applied is false when the word was handed back (the limiter closed
// meanwhile): the caller refunds the standalone word instead, which holds
// the bucket now.
func (c *countedWord) refund(rule *bucket.Rule, at bucket.Time, n int64) (applied, refused bool) {
	if n < 1 {
		return true, false
	}
	cost := bucket.CostOf(n, rule.Interval, rule.Ceiling)
	fromWord := int64(0)
	applied = c.update(at, rule, func(a, count int64) (int64, int64) {
		fromWord, refused = 0, !bucket.Refundable(rule, max(a, 0), n)
		if refused {
			return a, count
		}
		fromWord = min(count, n)
		if a > 0 {
			a = max(a-cost, 0)
		}
		return a, count - fromWord
	})
	if applied && !refused {
		unreport(&c.spill, n-fromWord)
	}
	return applied, refused
}

// drain takes the unreported count for a report, and moves an idle
// bucket's time up to idleAhead so that the word's time stays readable.
func (c *countedWord) drain(rule *bucket.Rule, at bucket.Time) int64 {
	var unsent int64
	c.update(at, rule, func(a, count int64) (int64, int64) {
		unsent = count
		return max(a, idleAhead), 0
	})
	return unsent + c.spill.Swap(0)
}

// handBack moves the bucket's state, read at now on the buckets' clock, to
// the standalone word tat, whose clock reads real at that instant, for a
// limiter that closed; it marks the word so that a taker still on the
// clustered path moves over too. The count left unreported moves to spill,
// for the last drain.
func (c *countedWord) handBack(tat *atomic.Int64, rule *bucket.Rule, at bucket.Time, real int64) {
	for {
		w := c.word.Load()
		unsent := int64(w & countMask)
		if unsent == handedBack {
			return
		}
		// The standalone word takes the state before the counted word
		// ends: nothing reads it until the counted word says it is handed
		// back, and if a decision changed the counted word meanwhile, the
		// swap below fails and the state is taken again. So a decision
		// that finds the word handed back finds the standalone word ready,
		// and never waits for it.
		tat.Store(real + readAhead(w, at, rule))
		if c.word.CompareAndSwap(w, packCounted(0, handedBack)) {
			c.spill.Add(unsent)
			return
		}
	}
}

// tat is the bucket's time, for statistics; ok is false once handed back.
func (c *countedWord) tat(rule *bucket.Rule, at bucket.Time) (int64, bool) {
	now := int64(at)
	w := c.word.Load()
	if w&countMask == handedBack {
		return 0, false
	}
	return now + spent(w, at, rule), true
}

// unreport takes up to n tokens out of a not-yet-sent count: the counted
// word's spill, or a keyed entry's pending count.
func unreport(pending *atomic.Int64, n int64) {
	for {
		old := pending.Load()
		if old <= 0 || pending.CompareAndSwap(old, max(0, old-n)) {
			return
		}
	}
}
