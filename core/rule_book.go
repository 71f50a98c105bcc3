package gopherpace

import (
	"fmt"
	"sync/atomic"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

// ruleBook holds the rules in force: a ruleSet, the default rule and its
// per-key overrides, immutable and swapped whole when a limit changes at
// runtime (SetRate, SetOverride), so that a decision reads one consistent
// set; and WithLookup's cache. The limiter and its engine share one.
type ruleBook struct {
	set    atomic.Pointer[ruleSet]
	lookup *lookupCache // nil without WithLookup (lookup.go)
}

type ruleSet struct {
	def       *bucket.Rule
	overrides map[uint64]ownRule // by key hash; nil without overrides
}

// ownRule is a key's rule of its own (an override), with the key it was
// given for: a caller's request gets it only by that key, never by
// another that shares its hash.
type ownRule struct {
	rule *bucket.Rule
	key  string
}

// replace puts set in force: New's, and each change setrate.go makes
// under Limiter.changeMu.
func (ps *ruleBook) replace(set *ruleSet) { ps.set.Store(set) }

// lookUpWith adds WithLookup's cache, once, in New.
func (ps *ruleBook) lookUpWith(c *lookupCache) { ps.lookup = c }

// dflt is the default rule.
func (ps *ruleBook) dflt() *bucket.Rule { return ps.set.Load().def }

// forKey is the rule for key hash h when only the hash is known (a
// peer's count): its override, its cached looked-up limit, or the
// default. A caller's request uses Limiter.keyRule, which can look up.
func (ps *ruleBook) forKey(h uint64) *bucket.Rule {
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
func (ps *ruleBook) each(f func(*bucket.Rule)) {
	s := ps.set.Load()
	f(s.def)
	for _, o := range s.overrides {
		f(o.rule)
	}
}

// checkCost rejects a cost the bucket could never grant.
func checkCost(rule *bucket.Rule, n int64) error {
	if n < 1 {
		return ErrInvalidCost
	}
	if n > rule.BucketSize {
		return fmt.Errorf("%w: cost %d, bucket size %d", ErrCostExceedsLimit, n, rule.BucketSize)
	}
	return nil
}
