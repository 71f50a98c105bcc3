package gopherpace

import (
	"strings"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

// Changing limits while running. A change swaps the limiter's rule set
// whole; then every live bucket on a changed rule is repriced: the
// tokens it has spent stay spent, counted at the new price (rounded up,
// so a change never hands out a token), and capped at the new bucket.
// A faster rate therefore takes effect at once, and no bucket stalls on
// debt priced at the old rate. A request that races the change may be
// decided against either rate.

// SetRate changes the default rule to tokens per per with a bucket of
// bucketSize, validated as New validates them. Clustered, set it on every node
// (as a configuration rollout does): until every node has the new rate,
// each refills its replicas at its own, and the cluster admits between
// the two; once all have it, the cluster follows it within a gossip
// interval.
func (l *Limiter) SetRate(tokens int64, per time.Duration, bucketSize int64) error {
	return l.setRate(l.changeTime(), tokens, per, bucketSize)
}

// changeTime is the time a change reprices the buckets at (see
// decider.changeTime).
func (l *Limiter) changeTime() int64 { return l.dec.changeTime() }

func (l *Limiter) setRate(now int64, tokens int64, per time.Duration, bucketSize int64) error {
	def, err := l.buildRule(tokens, per, bucketSize)
	if err != nil {
		return errorf("SetRate(%d, %v, %d): %w", tokens, per, bucketSize, err)
	}
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	old := l.rules.Set()
	l.rules.Replace(&bucket.RuleSet{Default: def, Overrides: old.Overrides})
	l.reprice(now, func(h uint64, _ bool) (*bucket.Rule, *bucket.Rule) {
		if _, ok := old.Overrides[h]; ok {
			return nil, nil
		}
		return old.Default, def
	})
	return nil
}

// SetOverride gives key a rule of its own, as WithOverrideRate does, or
// changes the one it has.
func (l *Limiter) SetOverride(key string, tokens int64, per time.Duration, bucketSize int64) error {
	return l.setOverride(l.changeTime(), key, tokens, per, bucketSize)
}

func (l *Limiter) setOverride(now int64, key string, tokens int64, per time.Duration, bucketSize int64) error {
	if key == "" {
		return errorf("override key must not be empty: SetRate changes the global bucket's rate")
	}
	rule, err := l.buildRule(tokens, per, bucketSize)
	if err != nil {
		return errorf("SetOverride(%q, %d, %v, %d): %w", key, tokens, per, bucketSize, err)
	}
	h := l.hasher.Sum(key)
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	old := l.rules.Set()
	overrides := make(map[uint64]bucket.OwnRule, len(old.Overrides)+1)
	for k, v := range old.Overrides {
		overrides[k] = v
	}
	overrides[h] = bucket.OwnRule{Rule: rule, Key: strings.Clone(key)}
	l.rules.Replace(&bucket.RuleSet{Default: old.Default, Overrides: overrides})
	l.repriceKey(now, h, forKeyIn(old, h), rule)
	return nil
}

// RemoveOverride puts key back on the default rule.
func (l *Limiter) RemoveOverride(key string) { l.removeOverride(l.changeTime(), key) }

func (l *Limiter) removeOverride(now int64, key string) {
	h := l.hasher.Sum(key)
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	old := l.rules.Set()
	from, ok := old.Overrides[h]
	if !ok || from.Key != key {
		return
	}
	var overrides map[uint64]bucket.OwnRule
	if len(old.Overrides) > 1 {
		overrides = make(map[uint64]bucket.OwnRule, len(old.Overrides)-1)
		for k, v := range old.Overrides {
			if k != h {
				overrides[k] = v
			}
		}
	}
	l.rules.Replace(&bucket.RuleSet{Default: old.Default, Overrides: overrides})
	l.repriceKey(now, h, from.Rule, old.Default)
}

// forKeyIn is the rule for key hash h in the set s.
func forKeyIn(s *bucket.RuleSet, h uint64) *bucket.Rule {
	if o, ok := s.Overrides[h]; ok {
		return o.Rule
	}
	return s.Default
}

// buildRule builds a rule for this limiter: checked as New checks it,
// with a clustered limiter's ceiling and caps.
func (l *Limiter) buildRule(tokens int64, per time.Duration, bucketSize int64) (*bucket.Rule, error) {
	rule, err := bucket.NewRule(tokens, per, bucketSize)
	if err != nil {
		return nil, err
	}
	if err := l.dec.admitRule(rule); err != nil {
		return nil, err
	}
	return rule, nil
}

// reprice reprices every bucket whose rule change pick reports (from,
// to; nil: unchanged): the global bucket (key hash 0, global true), every
// live keyed bucket.
func (l *Limiter) reprice(now int64, pick func(h uint64, global bool) (from, to *bucket.Rule)) {
	l.dec.reprice(now, pick)
}

// repriceKey reprices key hash h's live bucket from one rule to another.
func (l *Limiter) repriceKey(now int64, h uint64, from, to *bucket.Rule) {
	l.dec.repriceKey(now, h, from, to)
}
