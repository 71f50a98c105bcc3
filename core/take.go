package gopherpace

import "time"

// Take spends n tokens of key's bucket now; the key "" is the global
// bucket. It returns an error only for a cost below 1 or above the key's
// bucket size; a denial is a Decision with Allowed false. Like Allow, it
// never waits for tokens, but waits for its report for a few milliseconds
// (see Allow); TakeAt does not.
func (l *Limiter) Take(key string, n int64) (d Decision, err error) {
	if _, err = l.takeNow(&d, key, n); err == nil {
		l.counts.take(&d, n)
	}
	return
}

// TakeTimed is Take, also returning the time the decision was made at,
// for response fields that state absolute times (X-RateLimit-Reset)
// without a second read of the clock. Middleware uses it. The time is the
// limiter's creation time plus the monotonic time since, so it does not
// follow steps of the wall clock made after New.
func (l *Limiter) TakeTimed(key string, n int64) (d Decision, at time.Time, err error) {
	if at, err = l.takeNow(&d, key, n); err == nil {
		l.counts.take(&d, n)
	}
	return
}

// TakeAt is Take at the given time. It never waits.
func (l *Limiter) TakeAt(now time.Time, key string, n int64) (d Decision, err error) {
	_, err = l.take(&d, l.nanos(now), key, n)
	if !d.Allowed && err == nil && l.shadow != nil {
		l.letThrough(&d)
	}
	if err == nil {
		l.counts.take(&d, n)
	}
	return
}

// takeNow is take on the real clock, waiting for the report when it
// must. It returns the time of the decision: the limiter's epoch plus the
// monotonic time since, which costs one clock read where time.Now costs
// two.
func (l *Limiter) takeNow(d *Decision, key string, n int64) (time.Time, error) {
	now := int64(time.Since(l.epoch))
	waits, err := l.take(d, now, key, n)
	if waits {
		now = waitForReport(l.epoch, now, d.RetryAfter, func(now int64) (bool, time.Duration) {
			waits, err = l.take(d, now, key, n)
			return waits, d.RetryAfter
		})
	}
	if !d.Allowed && err == nil && l.shadow != nil {
		l.letThrough(d)
	}
	return l.epoch.Add(time.Duration(now)), err
}

// take decides into d, which saves copying a Decision up every level, and
// reports a wait for the report (see Allow).
func (l *Limiter) take(d *Decision, now int64, key string, n int64) (waits bool, err error) {
	if key == "" {
		p := l.pols.dflt()
		if err := p.checkCost(n); err != nil {
			return false, err
		}
		if l.eng != nil {
			return l.eng.take(d, now, n), nil
		}
		takeInto(d, &l.global.tat, p, now, n)
		stealInto(l.leases, d, now, n)
		return false, nil
	}
	h := hashKey(l.hashSecret, key)
	p := l.keyPolicy(h, key, now)
	if err := p.checkCost(n); err != nil {
		return false, err
	}
	if l.eng != nil {
		return l.eng.takeKeyed(d, h, p, now, n), nil
	}
	l.keys.take(d, h, p, now, n)
	return false, nil
}

// Refund gives back n tokens to key's bucket, for a request that was
// allowed but should not count (for example one that failed). A bucket is
// never filled past full. Clustered, a refund of tokens not yet reported to
// peers also takes them out of the report.
func (l *Limiter) Refund(key string, n int64) {
	l.refund(int64(time.Since(l.epoch)), key, n)
}

// RefundAt is Refund at the given time.
func (l *Limiter) RefundAt(now time.Time, key string, n int64) {
	l.refund(l.nanos(now), key, n)
}

func (l *Limiter) refund(now int64, key string, n int64) {
	if n < 1 {
		return
	}
	if key == "" {
		n = min(n, l.pols.dflt().burst)
		if l.eng != nil {
			l.eng.refundGlobal(now, n)
			return
		}
		refund(&l.global.tat, l.pols.dflt(), now, n)
		return
	}
	h := hashKey(l.hashSecret, key)
	p := l.keyPolicy(h, key, now)
	n = min(n, p.burst)
	if l.eng != nil {
		l.eng.refundKeyed(h, p, now, n)
		return
	}
	l.keys.with(h, func(e *plainEntry) { refund(&e.tat, p, now, n) })
}
