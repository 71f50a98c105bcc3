package gopherpace

import (
	"time"
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
	p, tat := l.pols.dflt(), int64(neverUsed)
	if key == "" {
		switch {
		case l.eng == nil:
			tat = l.global.tat.Load()
		default:
			now = l.eng.bucketTime(now)
			if t, ok := l.eng.global.tat(p, now); ok {
				tat = t
			} else {
				tat = l.global.tat.Load() // handed back: closed
			}
		}
	} else {
		h := hashKey(l.hashSecret, key)
		p = l.keyPolicy(h, key, now)
		if l.eng != nil {
			now = l.eng.bucketTime(now)
			if e := l.eng.keys.lookup(h); e != nil {
				if t := e.tat.Load(); t != evicted {
					tat = t
				}
			}
		} else {
			l.keys.with(h, func(e *plainEntry) { tat = e.tat.Load() })
		}
	}
	var d Decision
	base := max(tat, now)
	if next := base + costOf(n, p.interval, p.ceiling+p.tolerance); next-now > p.tolerance {
		p.fillDenied(&d, base, now, next, p.interval)
		return d
	}
	d = Decision{Allowed: true, BucketSize: p.burst, Remaining: p.tokensIn(now+p.tolerance-base, p.interval),
		ResetAfter: time.Duration(base - now), Window: p.window()}
	if key == "" && l.eng == nil && l.leases != nil {
		d.Remaining = min(p.burst, d.Remaining+l.leases.leased(now))
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
		if l.eng != nil && l.eng.global.reset(l.pols.dflt(), l.eng.bucketTime(now)) {
			return
		}
		refill(&l.global.tat)
		return
	}
	h := hashKey(l.hashSecret, key)
	if l.eng != nil {
		if e := l.eng.keys.lookup(h); e != nil {
			refill(&e.tat)
		}
		return
	}
	l.keys.with(h, func(e *plainEntry) { refill(&e.tat) })
}
