package gopherpace

import "time"

// Allow spends one token of the global bucket now. When the bucket is empty
// it returns false and how long until a token is available. A clustered
// limiter that is cut off from every peer under the fail-closed policy
// returns (false, 1s).
//
// Allow never waits for tokens. A clustered node that has admitted its
// share of the bucket since its peers last heard from it waits for its
// report to reach them instead (a few milliseconds, at most maxReportWait),
// rather than refuse a request while the cluster has tokens; AllowAt does
// not wait.
func (l *Limiter) Allow() (bool, time.Duration) {
	var ok bool
	var retry time.Duration
	if l.eng == nil {
		ok, retry = l.allowNanos(int64(time.Since(l.epoch)))
	} else {
		now := int64(time.Since(l.epoch))
		var waits bool
		if ok, retry, waits = l.eng.allow(now); waits {
			waitForReport(l.epoch, now, retry, func(now int64) (bool, time.Duration) {
				ok, retry, waits = l.eng.allow(now)
				return waits, retry
			})
		}
	}
	if !ok && l.shadow != nil {
		l.noteShadowDenial()
		return true, 0
	}
	l.counts.allow(ok)
	return ok, retry
}

// AllowAt is Allow at the given time.
func (l *Limiter) AllowAt(now time.Time) (bool, time.Duration) {
	ok, retry := l.allowNanos(l.nanos(now))
	if !ok && l.shadow != nil {
		l.noteShadowDenial()
		return true, 0
	}
	l.counts.allow(ok)
	return ok, retry
}

func (l *Limiter) allowNanos(now int64) (bool, time.Duration) {
	if l.eng != nil {
		ok, retry, _ := l.eng.allow(now)
		return ok, retry
	}
	lz, p := l.leases, l.pols.dflt()
	// The global bucket is never evicted, so the lean path applies.
	if lz == nil {
		ok, retry, _ := allow(&l.global.tat, p, now, 1)
		return ok, retry
	}
	if lz.hot(now) {
		return lz.allow(plainSource{&l.global.tat}, p, now)
	}
	ok, retry, contended := allow(&l.global.tat, p, now, 1)
	if contended {
		lz.lost(now)
	}
	if !ok {
		return l.stealOr(now, retry)
	}
	return true, 0
}

// stealOr answers a one-token request that the global bucket denied: with
// a token from any processor's fresh lease if there is one, otherwise with
// the denial.
func (l *Limiter) stealOr(now int64, retry time.Duration) (bool, time.Duration) {
	return stealOr(l.leases, now, retry)
}

func stealOr(lz *leases, now int64, retry time.Duration) (bool, time.Duration) {
	if lz != nil && lz.steal(now) {
		return true, 0
	}
	return false, retry
}

// stealInto is stealOr for a Decision of n tokens: only a one-token
// denial can be turned into an admit.
func stealInto(lz *leases, d *Decision, now, n int64) {
	if d.Allowed || n != 1 {
		return
	}
	if ok, _ := stealOr(lz, now, 0); ok {
		d.Allowed, d.RetryAfter = true, 0
	}
}
