package gopherpace

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"
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

// maxTolerance bounds burst×interval so that every sum of a state word, a
// timestamp and a cost stays far from int64 overflow (2^60 ns ≈ 36 years).
const maxTolerance = int64(1) << 60

// rule is the GCRA form of a rate (tokens per period) and a burst, in
// integer nanoseconds.
//
// interval is the emission interval per/tokens, rounded up so that the
// bucket never refills faster than the configured rate; tolerance is
// burst×interval, the furthest the theoretical arrival time may run ahead
// of now.
//
// When clustered, the engine moves two more fields as membership changes:
// localCap, the most tokens this node may admit before its peers have been
// told, and flushAt, the count of unreported tokens that triggers an early
// flush.
type rule struct {
	tokens     int64 // per period
	per        time.Duration
	bucketSize int64
	interval   int64
	tolerance  int64
	// ceiling is the furthest ahead of now a TAT can be in any history of
	// calls whose times move forward, but for bookings (Reserve): the
	// tolerance, plus a bucket of debt when peers charge it. A TAT beyond
	// it and the reach of bookings comes from a caller's time that ran
	// backwards, or from far ahead (settle).
	ceiling int64
	// reach is how far past a take's limit Reserve books (ns): standalone,
	// a window or maxBookingAhead, whichever is longer; clustered, a
	// window, the debt peers carry for it.
	reach    int64
	recip    uint64 // floor((2^64-1)/interval), for tokensIn
	localCap atomic.Int64
	flushAt  atomic.Int64
}

// newRule checks and builds a rule. Its errors say what is wrong in
// plain words, without the package prefix: the caller names the option or
// method the user wrote (see rateWords).
func newRule(tokens int64, per time.Duration, bucketSize int64) (*rule, error) {
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
	if bucketSize > maxTolerance/interval {
		return nil, fmt.Errorf("a bucket of %d at %d per %v would take more than %s to refill: lower the bucket size or raise the rate", bucketSize, tokens, per, longDuration(maxTolerance))
	}
	rule := &rule{tokens: tokens, per: per, bucketSize: bucketSize, interval: interval, tolerance: bucketSize * interval, recip: math.MaxUint64 / uint64(interval)}
	rule.reach = max(rule.tolerance, maxBookingAhead)
	rule.ceiling = rule.tolerance
	rule.localCap.Store(math.MaxInt64)
	rule.flushAt.Store(math.MaxInt64)
	return rule, nil
}

// perSecond is the rate in tokens per second.
func (rule *rule) perSecond() float64 { return float64(rule.tokens) / rule.per.Seconds() }

// tokensIn is x/unit rounded down, for x >= 0: the whole tokens that x
// nanoseconds buy. A 64-bit division costs tens of cycles, most of a
// Decision's price; for the rule's own interval it multiplies by the
// reciprocal instead. The product's high word q is never above the
// quotient and at most one below it, since x/interval − x·recip/2^64 <
// x/2^64 < 1; one comparison corrects it.
func (rule *rule) tokensIn(x, unit int64) int64 {
	if unit != rule.interval || x < 0 {
		return x / unit
	}
	q, _ := bits.Mul64(uint64(x), rule.recip)
	if uint64(x)-q*uint64(unit) >= uint64(unit) {
		q++
	}
	return int64(q)
}

// costOf is the time n tokens cost at unit ns each, saturating at limit so
// that no count, however large, overflows: n and unit are positive and a
// peer's count is anything the wire can carry.
func costOf(n, unit, limit int64) int64 {
	if n > limit/unit {
		return limit
	}
	return n * unit
}

// clusteredReach sets a clustered rule's reach and ceiling: bookings and
// peers' charges carry a bucket at most one window into debt (none for
// the reference design's floor at zero, whose ceiling stays the window).
func clusteredReach(rule *rule, floor bool) {
	rule.reach = rule.tolerance
	rule.ceiling = 2 * rule.tolerance
	if floor {
		rule.ceiling = rule.tolerance
	}
}

// chargedOf is how many of n tokens a charge costing cost ns spent when
// only moved ns of it landed (a cap on debt cut the rest): all n when it
// landed whole, else the whole tokens that moved.
func chargedOf(n, moved, cost, unit int64) int64 {
	if moved >= cost {
		return n
	}
	return moved / unit
}

// window is the time an empty bucket takes to fill.
func (rule *rule) window() time.Duration { return time.Duration(rule.tolerance) }

// checkCost rejects a cost the bucket could never grant.
func (rule *rule) checkCost(n int64) error {
	if n < 1 {
		return ErrInvalidCost
	}
	if n > rule.bucketSize {
		return fmt.Errorf("%w: cost %d, bucket size %d", ErrCostExceedsLimit, n, rule.bucketSize)
	}
	return nil
}

// fillAllowed and fillDenied write the Decision a bucket's numbers make:
// plain int64s, now among them the value of the caller's bucket time (a
// typed parameter would cost fillDenied its inlining).
func (rule *rule) fillAllowed(d *Decision, next, now, unit int64) {
	*d = Decision{
		Allowed:    true,
		BucketSize: rule.bucketSize,
		Remaining:  rule.tokensIn(now+rule.tolerance-next, unit),
		ResetAfter: time.Duration(next - now),
		Window:     rule.window(),
	}
}

func (rule *rule) fillDenied(d *Decision, base, now, next, unit int64) {
	*d = Decision{
		BucketSize: rule.bucketSize,
		Remaining:  max(0, rule.tokensIn(now+rule.tolerance-base, unit)),
		RetryAfter: time.Duration(next - rule.tolerance - now),
		ResetAfter: time.Duration(base - now),
		Window:     rule.window(),
	}
}

// ruleBook holds the rules in force: a ruleSet, the default rule and its
// per-key overrides, immutable and swapped whole when a limit changes at
// runtime (SetRate, SetOverride), so that a decision reads one consistent
// set; and WithLookup's cache. The limiter and its engine share one.
type ruleBook struct {
	set    atomic.Pointer[ruleSet]
	lookup *lookupCache // nil without WithLookup (lookup.go)
}

type ruleSet struct {
	def       *rule
	overrides map[uint64]ownRule // by key hash; nil without overrides
}

// ownRule is a key's rule of its own (an override), with the key it was
// given for: a caller's request gets it only by that key, never by
// another that shares its hash.
type ownRule struct {
	rule *rule
	key  string
}

// replace puts set in force: New's, and each change setrate.go makes
// under Limiter.changeMu.
func (ps *ruleBook) replace(set *ruleSet) { ps.set.Store(set) }

// lookUpWith adds WithLookup's cache, once, in New.
func (ps *ruleBook) lookUpWith(c *lookupCache) { ps.lookup = c }

// dflt is the default rule.
func (ps *ruleBook) dflt() *rule { return ps.set.Load().def }

// forKey is the rule for key hash h when only the hash is known (a
// peer's count): its override, its cached looked-up limit, or the
// default. A caller's request uses Limiter.keyRule, which can look up.
func (ps *ruleBook) forKey(h uint64) *rule {
	s := ps.set.Load()
	if s.overrides != nil {
		if o, ok := s.overrides[h]; ok {
			return o.rule
		}
	}
	if ps.lookup != nil {
		if rule := ps.lookup.cached(h); rule != nil {
			return rule
		}
	}
	return s.def
}

// hasOverrides reports whether any key may have a rule of its own.
func (ps *ruleBook) hasOverrides() bool { return ps.set.Load().overrides != nil || ps.lookup != nil }

// each calls f for the default rule and every override.
func (ps *ruleBook) each(f func(*rule)) {
	s := ps.set.Load()
	f(s.def)
	for _, o := range s.overrides {
		f(o.rule)
	}
}

// longDuration writes a span too long for time.Duration's hours to read
// well: "36 years", "13 days", or the Duration itself under a day.
func longDuration(ns int64) string {
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

// rateWords is how the user wrote a rate: WithRefillRate(20) for a rate
// per second, WithRate(10, 1h0m0s) otherwise.
func rateWords(fn string, tokens int64, per time.Duration, bucketSize int64) string {
	switch fn {
	case "WithRefillRate":
		return fmt.Sprintf("WithRefillRate(%d)", tokens)
	case "WithRate":
		return fmt.Sprintf("WithRate(%d, %v)", tokens, per)
	}
	return fmt.Sprintf("%s(%d, %v, %d)", fn, tokens, per, bucketSize)
}

// sizeCaps sets rule's early-flush threshold and its cap of unreported
// tokens for a cluster of known nodes (peerView retunes the rules as the
// cluster changes).
func sizeCaps(rule *rule, known int) {
	flushAt := max(1, rule.bucketSize/100)
	rule.flushAt.Store(flushAt)
	rule.localCap.Store(max(2*flushAt, ceilDiv(rule.bucketSize, int64(known))))
}
