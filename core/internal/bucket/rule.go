package bucket

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// The periods a rate may be given over: a microsecond to a leap year.
const (
	minPeriod = time.Microsecond
	maxPeriod = 366 * 24 * time.Hour
)

// maxBookingAhead is how far ahead a standalone bucket books for callers
// that wait (Reserve) when its window is shorter: long enough for a
// shaping delay of seconds on a bucket of one.
const maxBookingAhead = int64(30 * time.Second)

// MaxTolerance bounds size×interval so that every sum of a state word, a
// timestamp and a cost stays far from int64 overflow (2^60 ns ≈ 36 years).
const MaxTolerance = int64(1) << 60

// Rule is the GCRA form of a rate (tokens per period) and a bucket size, in
// integer nanoseconds.
//
// interval is the emission interval per/tokens, rounded up so that the
// bucket never refills faster than the configured rate; tolerance is
// size×interval, the furthest the theoretical arrival time may run ahead
// of now.
//
// When clustered, the engine moves two more fields as membership changes:
// LocalCap, the most tokens this node may admit before its peers have been
// told, and FlushAt, the count of unreported tokens that triggers an early
// flush.
type Rule struct {
	Tokens     int64 // per period
	Per        time.Duration
	BucketSize int64
	Interval   int64
	Tolerance  int64
	// Ceiling is the furthest ahead of now a TAT can be in any history of
	// calls whose times move forward, but for bookings (Reserve): the
	// tolerance, plus a bucket of debt when peers charge it. A TAT beyond
	// it and the reach of bookings comes from a caller's time that ran
	// backwards, or from far ahead (settle).
	Ceiling int64
	// Reach is how far past a take's limit Reserve books (ns): standalone,
	// a window or maxBookingAhead, whichever is longer; clustered, a
	// window, the debt peers carry for it.
	Reach    int64
	recip    uint64 // floor((2^64-1)/interval), for TokensIn
	LocalCap atomic.Int64
	FlushAt  atomic.Int64
}

// NewRule checks and builds a rule. Its errors say what is wrong in
// plain words, without the package prefix: the caller names the option or
// method the user wrote (see RateWords).
func NewRule(tokens int64, per time.Duration, bucketSize int64) (*Rule, error) {
	switch {
	case per < minPeriod || per > maxPeriod:
		return nil, fmt.Errorf("the period %v is outside %v to %v: express the rate over a period in that range", per, minPeriod, maxPeriod)
	case tokens <= 0:
		return nil, fmt.Errorf("the rate must be at least 1 token per %v, got %d", per, tokens)
	case tokens > int64(per):
		return nil, fmt.Errorf("%d per %v is above the maximum of one token a nanosecond: lower the tokens or lengthen the period", tokens, per)
	case bucketSize < 1:
		return nil, fmt.Errorf("the bucket size must be at least 1 token, got %d", bucketSize)
	}
	interval := (int64(per) + tokens - 1) / tokens
	if bucketSize > MaxTolerance/interval {
		return nil, fmt.Errorf("a bucket of %d at %d per %v would take more than %s to refill: lower the bucket size or raise the rate", bucketSize, tokens, per, LongDuration(MaxTolerance))
	}
	rule := &Rule{Tokens: tokens, Per: per, BucketSize: bucketSize, Interval: interval, Tolerance: bucketSize * interval, recip: math.MaxUint64 / uint64(interval)}
	rule.Reach = max(rule.Tolerance, maxBookingAhead)
	rule.Ceiling = rule.Tolerance
	rule.LocalCap.Store(math.MaxInt64)
	rule.FlushAt.Store(math.MaxInt64)
	return rule, nil
}

// PerSecond is the rate in tokens per second.
func (rule *Rule) PerSecond() float64 { return float64(rule.Tokens) / rule.Per.Seconds() }

// TokensIn is x/unit rounded down, for x >= 0: the whole tokens that x
// nanoseconds buy. A 64-bit division costs tens of cycles, most of a
// Decision's price; for the rule's own interval it multiplies by the
// reciprocal instead. The product's high word q is never above the
// quotient and at most one below it, since x/interval − x·recip/2^64 <
// x/2^64 < 1; one comparison corrects it.
func (rule *Rule) TokensIn(x, unit int64) int64 {
	if unit != rule.Interval || x < 0 {
		return x / unit
	}
	q, _ := bits.Mul64(uint64(x), rule.recip)
	if uint64(x)-q*uint64(unit) >= uint64(unit) {
		q++
	}
	return int64(q)
}

// CostOf is the time n tokens cost at unit ns each, saturating at limit so
// that no count, however large, overflows: n and unit are positive and a
// peer's count is anything the wire can carry.
func CostOf(n, unit, limit int64) int64 {
	if n > limit/unit {
		return limit
	}
	return n * unit
}

// SettleBeyond is how far ahead of now a word's time must lie before a
// denial restarts it (Settle): a window beyond both the ceiling and the
// reach of bookings, which no history whose times move forward leaves.
// Every bucket word, plain or counted, settles at it.
func (rule *Rule) SettleBeyond() int64 {
	return max(rule.Ceiling, rule.Tolerance+rule.Reach) + rule.Tolerance
}

// ClusteredReach sets a clustered rule's reach and ceiling: bookings and
// peers' charges carry a bucket at most one window into debt (none for
// the reference design's floor at zero, whose ceiling stays the window).
func ClusteredReach(rule *Rule, floor bool) {
	rule.Reach = rule.Tolerance
	rule.Ceiling = 2 * rule.Tolerance
	if floor {
		rule.Ceiling = rule.Tolerance
	}
}

// ChargedOf is how many of n tokens a charge costing cost ns spent when
// only moved ns of it landed (a cap on debt cut the rest): all n when it
// landed whole, else the whole tokens that moved.
func ChargedOf(n, moved, cost, unit int64) int64 {
	if moved >= cost {
		return n
	}
	return moved / unit
}

// Window is the time an empty bucket takes to fill.
func (rule *Rule) Window() time.Duration { return time.Duration(rule.Tolerance) }

// FillAllowed and FillDenied write the Decision a bucket's numbers make:
// plain int64s, now among them the value of the caller's bucket time (a
// typed parameter would cost FillDenied its inlining).
func (rule *Rule) FillAllowed(d *render.Decision, next, now, unit int64) {
	*d = render.Decision{
		Allowed:    true,
		BucketSize: rule.BucketSize,
		Remaining:  rule.TokensIn(now+rule.Tolerance-next, unit),
		ResetAfter: time.Duration(next - now),
		Window:     rule.Window(),
	}
}

func (rule *Rule) FillDenied(d *render.Decision, base, now, next, unit int64) {
	*d = render.Decision{
		BucketSize: rule.BucketSize,
		Remaining:  max(0, rule.TokensIn(now+rule.Tolerance-base, unit)),
		RetryAfter: time.Duration(next - rule.Tolerance - now),
		ResetAfter: time.Duration(base - now),
		Window:     rule.Window(),
	}
}

// LongDuration writes a span too long for time.Duration's hours to read
// well: "36 years", "13 days", or the Duration itself under a day.
func LongDuration(ns int64) string {
	const day = int64(24 * time.Hour)
	switch d := time.Duration(ns); {
	case ns >= 2*365*day:
		return fmt.Sprintf("%d years", ns/(365*day))
	case ns >= 2*day:
		return fmt.Sprintf("%d days", ns/day)
	default:
		return d.String()
	}
}

// RateWords is how the user wrote a rate: WithRefillRate(20) for a rate
// per second, WithRate(10, 1h0m0s) otherwise.
func RateWords(fn string, tokens int64, per time.Duration, bucketSize int64) string {
	switch fn {
	case "WithRefillRate":
		return fmt.Sprintf("WithRefillRate(%d)", tokens)
	case "WithRate":
		return fmt.Sprintf("WithRate(%d, %v)", tokens, per)
	}
	return fmt.Sprintf("%s(%d, %v, %d)", fn, tokens, per, bucketSize)
}

// SizeCaps sets rule's early-flush threshold and its cap of unreported
// tokens for a cluster of known nodes (peerView retunes the rules as the
// cluster changes).
func SizeCaps(rule *Rule, known int) {
	flushAt := max(1, rule.BucketSize/100)
	rule.FlushAt.Store(flushAt)
	rule.LocalCap.Store(max(2*flushAt, CeilDiv(rule.BucketSize, int64(known))))
}

// CeilDiv is a ÷ b rounded up, for positive a and b.
func CeilDiv(a, b int64) int64 { return (a + b - 1) / b }

// MaxChargeDebt is how far beyond empty charges (Limiter.Charge) may take
// a bucket, in buckets: one, the same cap peers' reports have, so a key
// charged any amount is admitted again within two windows.
const MaxChargeDebt = 1

// ChargeDebt is how far beyond empty a charge may take a bucket of rule,
// in ns.
func ChargeDebt(rule *Rule) int64 { return MaxChargeDebt * rule.Tolerance }
