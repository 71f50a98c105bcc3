package gopherpace

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// maxRate is the largest refill rate accepted: one token per nanosecond. Above
// it the emission interval would round to zero.
const maxRate = int64(time.Second)

// maxTolerance bounds burst×interval so that every sum of a state word, a
// timestamp and a cost stays far from int64 overflow (2^60 ns ≈ 36 years).
const maxTolerance = int64(1) << 60

// policy is the GCRA form of a (rate, burst) pair, in integer nanoseconds.
//
// interval is the emission interval 1s/rate, rounded up so that the bucket
// never refills faster than the configured rate; tolerance is burst×interval,
// the furthest the theoretical arrival time may run ahead of now.
//
// When clustered, the engine moves three more fields as membership changes:
// unit, the time one token costs (interval, scaled up while this node sees
// only part of the cluster); localCap, the most tokens this node may admit
// before its peers have been told; and flushAt, the count of unreported
// tokens that triggers an early flush.
type policy struct {
	rate      int64
	burst     int64
	interval  int64
	tolerance int64
	recip     uint64 // floor((2^64-1)/interval), for tokensIn
	unit      atomic.Int64
	localCap  atomic.Int64
	flushAt   atomic.Int64
}

func newPolicy(rate, burst int64) (*policy, error) {
	if rate <= 0 {
		return nil, errorf("refill rate must be > 0, got %d", rate)
	}
	if rate > maxRate {
		return nil, errorf("refill rate %d/s is above the maximum of %d/s", rate, maxRate)
	}
	if burst < 1 {
		return nil, errorf("bucket size must be >= 1, got %d", burst)
	}
	interval := (int64(time.Second) + rate - 1) / rate
	if burst > maxTolerance/interval {
		return nil, errorf("bucket size %d at %d/s spans more than %v of refill", burst, rate, time.Duration(maxTolerance))
	}
	p := &policy{rate: rate, burst: burst, interval: interval, tolerance: burst * interval, recip: math.MaxUint64 / uint64(interval)}
	p.unit.Store(interval)
	p.localCap.Store(math.MaxInt64)
	p.flushAt.Store(math.MaxInt64)
	return p, nil
}

// tokensIn is x/unit rounded down, for x >= 0: the whole tokens that x
// nanoseconds buy. A 64-bit division costs tens of cycles, most of a
// Decision's price; for the policy's own interval it multiplies by the
// reciprocal instead. The product's high word q is never above the
// quotient and at most one below it, since x/interval − x·recip/2^64 <
// x/2^64 < 1; one comparison corrects it.
func (p *policy) tokensIn(x, unit int64) int64 {
	if unit != p.interval || x < 0 {
		return x / unit
	}
	q, _ := bits.Mul64(uint64(x), p.recip)
	if uint64(x)-q*uint64(unit) >= uint64(unit) {
		q++
	}
	return int64(q)
}

// window is the time an empty bucket takes to fill.
func (p *policy) window() time.Duration { return time.Duration(p.tolerance) }

// bucket is one GCRA token bucket: a single word, the theoretical arrival
// time (TAT) in nanoseconds since the limiter's epoch. The bucket is full
// whenever tat <= now. It is padded to a cache line so that two hot buckets
// never share one.
type bucket struct {
	tat atomic.Int64
	_   [56]byte
}

func (b *bucket) init() { b.tat.Store(neverUsed) }

// neverUsed is the state of a bucket that has not spent a token yet: a
// theoretical arrival time so far in the past that the bucket is full at any
// time a caller may pass, even one before the limiter was created.
const neverUsed = math.MinInt64 / 4

// evicted marks a keyed bucket that the store has removed; a taker that sees
// it looks the key up again.
const evicted = math.MinInt64

// take tries to spend n tokens at now. It never spends on a denial, and it
// reports ok=false with retry when the state word was evicted under it.
func take(tat *atomic.Int64, p *policy, now, n int64) (d Decision, ok bool) {
	ok = takeInto(&d, tat, p, now, n)
	return
}

// takeInto is take writing its Decision into d: a Decision is six words,
// and copying it up through every caller costs more than deciding.
func takeInto(d *Decision, tat *atomic.Int64, p *policy, now, n int64) (ok bool) {
	unit := p.unit.Load()
	cost := n * unit
	old := tat.Load()
	for {
		if old == evicted {
			return false
		}
		base := max(old, now)
		next := base + cost
		if next-now > p.tolerance {
			p.fillDenied(d, base, now, next, unit)
			return true
		}
		if tat.CompareAndSwap(old, next) {
			p.fillAllowed(d, next, now, unit)
			return true
		}
		old = tat.Add(0) // see allow
	}
}

// allow is take for callers that need only the verdict and the retry
// delay: it skips the divisions that fill a Decision. contended reports
// that a compare-and-swap lost a race.
func allow(tat *atomic.Int64, p *policy, now, n int64) (ok bool, retry time.Duration, contended bool) {
	cost := n * p.unit.Load()
	old := tat.Load()
	for {
		next := max(old, now) + cost
		if next-now > p.tolerance {
			return false, time.Duration(next - p.tolerance - now), contended
		}
		if tat.CompareAndSwap(old, next) {
			return true, 0, contended
		}
		contended = true
		// Contended: read the word with a locked add of zero, which takes the
		// cache line exclusive, so that the next compare-and-swap does not
		// have to upgrade it from shared (one transfer between cores, not two).
		old = tat.Add(0)
	}
}

func (p *policy) fillAllowed(d *Decision, next, now, unit int64) {
	*d = Decision{
		Allowed:    true,
		Limit:      p.burst,
		Remaining:  p.tokensIn(now+p.tolerance-next, unit),
		ResetAfter: time.Duration(next - now),
		Window:     p.window(),
	}
}

func (p *policy) fillDenied(d *Decision, base, now, next, unit int64) {
	*d = Decision{
		Limit:      p.burst,
		Remaining:  max(0, p.tokensIn(now+p.tolerance-base, unit)),
		RetryAfter: time.Duration(next - p.tolerance - now),
		ResetAfter: time.Duration(base - now),
		Window:     p.window(),
	}
}

// refund gives n tokens back, never filling the bucket past full.
func refund(tat *atomic.Int64, p *policy, now, n int64) {
	cost := n * p.unit.Load()
	for {
		old := tat.Load()
		if old == evicted || old <= now {
			return
		}
		next := max(old-cost, now)
		if tat.CompareAndSwap(old, next) {
			return
		}
	}
}

// debit charges n tokens that a peer admitted. Unlike a local take it always
// lands, carrying the bucket into debt, so that load spread over many nodes
// adds up; the debt is capped at maxDebt beyond empty, so that a burst of
// stale counts (after a partition heals, say) cannot stall the bucket for
// long. maxDebt 0 is the reference design's floor at zero.
func debit(tat *atomic.Int64, p *policy, now, n, maxDebt int64) {
	cost := n * p.unit.Load()
	limit := now + p.tolerance + maxDebt
	for {
		old := tat.Load()
		if old == evicted || old >= limit {
			return
		}
		next := min(max(old, now)+cost, limit)
		if tat.CompareAndSwap(old, next) {
			return
		}
	}
}
