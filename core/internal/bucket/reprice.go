package bucket

import "sync/atomic"

// Reprice moves a plain word from one rule to another at at, keeping the
// tokens it has spent: a rule changed while running (SetRate,
// SetOverride) counts them at the new price.
func Reprice(tat *atomic.Int64, from, to *Rule, at Time) {
	now := int64(at)
	for {
		old := tat.Load()
		if old == Evicted || old <= now {
			return // gone, or full: nothing is owed
		}
		next := now + Repriced(old-now, from, to)
		if tat.CompareAndSwap(old, next) {
			return
		}
	}
}

// Repriced is ahead ns of spent tokens at from's price, at to's: whole
// tokens, rounded up (so a change never hands out a token), capped at
// to's ceiling.
func Repriced(ahead int64, from, to *Rule) int64 {
	return CostOf(CeilDiv(ahead, from.Interval), to.Interval, to.Ceiling)
}
