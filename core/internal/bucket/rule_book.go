package bucket

import "sync/atomic"

// A Book holds the rules in force: a RuleSet, the default rule and its
// per-key overrides, immutable and swapped whole when a limit changes at
// runtime (SetRate, SetOverride), so that a decision reads one consistent
// set; and the cache of looked-up rules (WithLookup). A limiter and its
// engine share one.
type Book struct {
	set    atomic.Pointer[RuleSet]
	lookup Cache // nil without WithLookup
}

// A RuleSet is the default rule and the keys' own rules.
type RuleSet struct {
	Default   *Rule
	Overrides map[uint64]OwnRule // by key hash; nil without overrides
}

// An OwnRule is a key's rule of its own (an override), with the key it
// was given for: a caller's request gets it only by that key, never by
// another that shares its hash.
type OwnRule struct {
	Rule *Rule
	Key  string
}

// A Cache holds looked-up rules by key hash.
type Cache interface {
	// Cached is key hash h's looked-up rule, nil when it has none.
	Cached(h uint64) *Rule
}

// Replace puts set in force.
func (b *Book) Replace(set *RuleSet) { b.set.Store(set) }

// Set is the set in force.
func (b *Book) Set() *RuleSet { return b.set.Load() }

// LookUpWith adds the cache of looked-up rules, once, before any decision.
func (b *Book) LookUpWith(c Cache) { b.lookup = c }

// Default is the default rule.
func (b *Book) Default() *Rule { return b.set.Load().Default }

// ForKey is the rule for key hash h when only the hash is known (a peer's
// count): its override, its cached looked-up rule, or the default. A
// caller's request, which has the key, can look up.
func (b *Book) ForKey(h uint64) *Rule {
	s := b.set.Load()
	if s.Overrides != nil {
		if o, ok := s.Overrides[h]; ok {
			return o.Rule
		}
	}
	if b.lookup != nil {
		if rule := b.lookup.Cached(h); rule != nil {
			return rule
		}
	}
	return s.Default
}

// HasOverrides reports whether any key may have a rule of its own.
func (b *Book) HasOverrides() bool { return b.set.Load().Overrides != nil || b.lookup != nil }

// Each calls f for the default rule and every override.
func (b *Book) Each(f func(*Rule)) {
	s := b.set.Load()
	f(s.Default)
	for _, o := range s.Overrides {
		f(o.Rule)
	}
}
