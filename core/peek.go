package gopherpace

import (
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

// Reading a bucket without spending from it, and refilling one at once.

// Peek reports key's bucket ("" the global one) as a one-token Take would
// find it now, without spending anything: Allowed says whether that Take
// would be admitted, Remaining how many whole tokens are left, RetryAfter
// (when not allowed) how long until one frees up, and ResetAfter how long
// until the bucket is full. A key never used, or whose bucket has
// refilled and been dropped, reads as a full bucket.
func (l *Limiter) Peek(key string) Decision { return l.peek(int64(time.Since(l.epoch)), key, 1) }

// PeekAt is Peek at the given time.
func (l *Limiter) PeekAt(now time.Time, key string) Decision { return l.peek(l.nanos(now), key, 1) }

// peek reads key's bucket as an n-token take would find it at now.
func (l *Limiter) peek(now int64, key string, n int64) Decision {
	rule := l.rules.Default()
	var tat, leased int64
	var at bucket.Time
	if key == "" {
		tat, at, leased = l.dec.peekGlobal(now)
	} else {
		h := l.hasher.Sum(key)
		rule = l.keyRule(h, key, now)
		tat, at = l.dec.peekKeyed(h, now)
	}
	return peekDecision(rule, tat, at, n, leased)
}

// peekDecision is the Decision an n-token take of a bucket of rule at tat
// would get at now (both on the buckets' clock), with leased tokens held
// by leases besides.
func peekDecision(rule *bucket.Rule, tat int64, at bucket.Time, n, leased int64) Decision {
	now := int64(at)
	var d Decision
	base := max(tat, now)
	if next := base + bucket.CostOf(n, rule.Interval, rule.Ceiling+rule.Tolerance); next-now > rule.Tolerance {
		rule.FillDenied((&d).raw(), base, now, next, rule.Interval)
		return d
	}
	d = Decision{Allowed: true, BucketSize: rule.BucketSize, Remaining: rule.TokensIn(now+rule.Tolerance-base, rule.Interval),
		ResetAfter: time.Duration(base - now), Window: rule.Window()}
	if leased > 0 {
		d.Remaining = min(rule.BucketSize, d.Remaining+leased)
	}
	return d
}

// Reset refills key's bucket ("" the global one) at once, as a support
// tool does after a false lockout. Clustered, it refills this node's
// replica only: received frames never add tokens (docs/security.md), so a
// bucket is reset cluster-wide by calling Reset on every node. Admits not
// yet reported to peers are still reported.
func (l *Limiter) Reset(key string) { l.reset(int64(time.Since(l.epoch)), key) }

// ResetAt is Reset at the given time.
func (l *Limiter) ResetAt(now time.Time, key string) { l.reset(l.nanos(now), key) }

func (l *Limiter) reset(now int64, key string) {
	if key == "" {
		l.dec.resetGlobal(now)
		return
	}
	l.dec.resetKeyed(l.hasher.Sum(key))
}
