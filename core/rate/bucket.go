package rate

import "time"

// bucket is a standalone Limiter's state, guarded by the Limiter's mutex.
// A finite limit keeps a GCRA theoretical arrival time: tat, the time at
// which the bucket is full, in integer ns since the epoch. Tokens are
// then exact to the nanosecond, with no float rounding to add or lose any,
// and a time before one already seen finds the bucket emptier, never
// fuller: time that runs backwards never allows more. A limit that
// refills nothing keeps whole tokens instead (stock), and Inf keeps
// nothing: it spends nothing.
type bucket struct {
	ready     bool      // set up for the limit it holds
	epoch     time.Time // the first time passed; times are ns since it
	hasEpoch  bool
	interval  int64 // ns per token; 0 for Inf, never for no refill
	tat       int64 // a finite limit's: when the bucket is full
	stock     int64 // a limit that refills nothing: the tokens held
	lastEvent int64 // the latest reservation's time to act
}

// full is a tat at which the bucket is full at any time a caller passes.
const full = -2 * maxNow

// setUp readies the bucket for limit l and burst b. It starts full, but
// for the zero Limiter, which holds no token (it rejects every event, as
// x/time/rate's does).
func (b *bucket) setUp(l Limit, burst int, fill bool) {
	b.ready = true
	b.interval = intervalOf(l)
	b.tat, b.stock, b.lastEvent = full, 0, full
	if fill {
		b.stock = int64(max(burst, 0))
	}
}

// nanos is t in ns since the epoch, which the first time passed sets.
func (b *bucket) nanos(t time.Time) int64 {
	if !b.hasEpoch {
		b.epoch, b.hasEpoch = t, true
	}
	return min(max(int64(t.Sub(b.epoch)), -maxNow), maxNow)
}

func (b *bucket) timeOf(ns int64) time.Time { return b.epoch.Add(time.Duration(ns)) }

// tolerance is how far ahead of now the tat of an empty bucket is.
func (b *bucket) tolerance(burst int) int64 {
	return min(mul(int64(max(burst, 0)), b.interval), maxNow)
}

// tokens is what the bucket holds at now: fractional, and negative while
// reservations run ahead of the refill.
func (b *bucket) tokens(now int64, burst int) float64 {
	switch {
	case b.interval == 0:
		return float64(burst)
	case b.interval == never:
		return float64(b.stock)
	}
	ahead := b.tat - now
	if ahead <= 0 {
		return float64(burst)
	}
	return float64(burst) - float64(ahead)/float64(b.interval)
}

// reserve spends n tokens if the time they are due is no more than
// maxFuture past now, and returns that time; ok false spends nothing.
// n below zero spends nothing, like zero: a reservation never gives
// tokens back (Cancel does).
func (b *bucket) reserve(now int64, n, burst int, maxFuture time.Duration) (act int64, ok bool) {
	if b.interval == 0 {
		return now, true
	}
	k := int64(max(n, 0))
	if k > int64(burst) {
		return 0, false
	}
	if b.interval == never {
		// Tokens that never come are never due: not OK whatever
		// maxFuture is (x/time/rate's would be, at InfDuration).
		if b.stock < k {
			return 0, false
		}
		b.stock -= k
		b.lastEvent = now
		return now, true
	}
	next := max(b.tat, now) + min(mul(k, b.interval), maxAhead)
	wait := max(next-b.tolerance(burst)-now, 0)
	if time.Duration(wait) > maxFuture || next-now > maxAhead {
		return 0, false
	}
	if k > 0 {
		b.tat = next
	}
	act = now + wait
	b.lastEvent = act
	return act, true
}

// setLimit changes the bucket to limit l at now, keeping the tokens it
// holds (rounded down where the new limit cannot hold a fraction).
func (b *bucket) setLimit(now int64, l Limit, burst int) {
	to := intervalOf(l)
	from := b.interval
	switch {
	case to == from:
	case from == 0: // from Inf: full, as time at an infinite rate made it
		b.tat, b.stock = full, int64(max(burst, 0))
	case to == 0: // to Inf: spends nothing while it lasts
	case from == never:
		b.tat = now + min(mul(max(int64(burst)-b.stock, 0), to), maxAhead)
	case to == never:
		ahead := max(b.tat-now, 0)
		owed := ahead / from
		if ahead%from != 0 {
			owed++
		}
		b.stock = int64(max(burst, 0)) - owed
	default:
		b.tat = now + min(rescale(b.tat-now, from, to, true), maxAhead)
	}
	b.interval = to
}

// setBurst changes the bucket's size at now, keeping the tokens it holds
// up to the new size.
func (b *bucket) setBurst(now int64, from, to int) {
	switch b.interval {
	case 0:
	case never:
		b.stock = min(b.stock, int64(max(to, 0)))
	default:
		ahead := max(b.tat-now, 0)
		grown := mul(int64(max(to, 0)), b.interval) - b.tolerance(from)
		b.tat = add(now, max(add(ahead, grown), 0))
	}
}

// cancel gives back what a reservation of n tokens due at act, made when
// a token took interval ns, still holds at now: its tokens less those
// reserved after it (x/time/rate's rule), never past a full bucket.
func (b *bucket) cancel(now int64, n int, act, interval int64, burst int) {
	if b.interval == 0 || n <= 0 || act < now {
		return
	}
	var back int64 // in tokens of the bucket's interval, as ns; or whole tokens
	switch {
	case interval > 0:
		held := mul(int64(n), interval) - max(b.lastEvent-act, 0)
		if held <= 0 {
			return
		}
		if b.interval == never {
			back = held / interval
		} else {
			back = rescale(held, interval, b.interval, false)
		}
	case b.interval == never:
		back = int64(n)
	default:
		back = mul(int64(n), b.interval)
	}
	if b.interval == never {
		b.stock = min(b.stock+back, int64(max(burst, 0)))
	} else {
		b.tat = max(add(b.tat, -back), now)
	}
	if act == b.lastEvent && interval > 0 {
		if prev := add(act, -mul(int64(n), interval)); prev >= now {
			b.lastEvent = prev
		}
	}
}
