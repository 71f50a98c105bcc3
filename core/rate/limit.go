package rate

import (
	"math"
	"math/bits"
	"time"
)

// Limit is the most events per second a Limiter allows. A zero Limit
// allows no events, beyond the tokens the bucket already holds.
type Limit float64

// Inf is the limit with no limit: every event is allowed, even with a zero
// burst.
const Inf = Limit(math.MaxFloat64)

// InfDuration is the delay of a Reservation that is not OK.
const InfDuration = time.Duration(math.MaxInt64)

// Every is the Limit of one event per interval; Inf for an interval of
// zero or less.
func Every(interval time.Duration) Limit {
	if interval <= 0 {
		return Inf
	}
	return 1 / Limit(interval.Seconds())
}

// Times are ns since the epoch (the first time a bucket is passed), held
// to ±maxNow (36 years either way). A bucket holds at most maxNow of
// refill (a burst beyond it acts as that much: 36 years' worth) and books
// at most maxAhead ahead of now, so that no sum the buckets form
// nears int64's edges.
const (
	maxNow   = int64(1) << 60
	maxAhead = 2 * maxNow
	maxTime  = 4 * maxNow // what add and mul saturate at
)

// never is the interval of a limit that refills nothing: zero, negative,
// NaN, or so small that a token would take longer than maxTime.
const never = int64(-1)

// intervalOf is the time one token of l takes to refill, in whole ns
// rounded up, so that a Limiter never allows more than l: a limit of 3
// refills a token every 333,333,334 ns. Limits above 1e9 a second refill
// one token a nanosecond. 0 stands for Inf.
func intervalOf(l Limit) int64 {
	if l >= Inf {
		return 0
	}
	if !(l > 0) {
		return never
	}
	ns := math.Ceil(1e9 / float64(l))
	if ns > float64(maxTime) {
		return never
	}
	return max(int64(ns), 1)
}

// add is a + b held to ±maxTime.
func add(a, b int64) int64 {
	s := a + b
	if (s > a) != (b > 0) { // overflowed int64
		if b > 0 {
			return maxTime
		}
		return -maxTime
	}
	return min(max(s, -maxTime), maxTime)
}

// mul is n·unit for n, unit >= 0, held to maxTime.
func mul(n, unit int64) int64 {
	if unit != 0 && n > maxTime/unit {
		return maxTime
	}
	return n * unit
}

// rescale is d, a time measured in tokens of from ns, in tokens of to ns:
// d·to/from, rounded up when up is set and down otherwise, held to
// maxTime.
func rescale(d, from, to int64, up bool) int64 {
	if d <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(d), uint64(to))
	if hi >= uint64(from) {
		return maxTime
	}
	q, r := bits.Div64(hi, lo, uint64(from))
	if up && r != 0 {
		q++
	}
	return int64(min(q, uint64(maxTime)))
}
