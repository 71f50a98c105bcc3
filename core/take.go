package gopherpace

import (
	"fmt"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

// Take spends n tokens of key's bucket now; the key "" is the global
// bucket. It returns an error only for a cost below 1 or above the key's
// bucket size; a denial is a Decision with Allowed false. Like Allow, it
// never waits for tokens, but waits for its report for a few milliseconds
// (see Allow); TakeAt does not.
func (l *Limiter) Take(key string, n int64) (d Decision, err error) {
	if _, err = l.decideNow(&d, key, n); err == nil {
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
	now, err := l.decideNow(&d, key, n)
	if err == nil {
		l.counts.take(&d, n)
	}
	return d, l.epoch.Add(time.Duration(now)), err
}

// TakeAt is Take at the given time. It never waits.
func (l *Limiter) TakeAt(now time.Time, key string, n int64) (d Decision, err error) {
	if _, err = l.decide(&d, l.nanos(now), key, n); err == nil {
		l.counts.take(&d, n)
	}
	return
}

// The pipeline every n-token decision goes through: the clock (the
// real-clock forms read it once), decide (the decider, which also steals
// a leased token for a one-token denial), the wait for the report (the
// real-clock forms only: the ...At forms return it as a denial), the
// top keys (WithTopKeys), then shadow mode. The public forms then count the outcome. Allow runs the
// same steps on its own lean types (allow.go).

// decideNow is the pipeline on the real clock. It returns the limiter's
// time of the decision (nanoseconds since the epoch, the monotonic time
// since New): one clock read where time.Now costs two.
func (l *Limiter) decideNow(d *Decision, key string, n int64) (int64, error) {
	now := int64(time.Since(l.epoch))
	waits, err := l.take(d, now, key, n)
	if waits {
		now = waitForReport(l.epoch, now, d.RetryAfter, func(now int64) (bool, time.Duration) {
			waits, err = l.take(d, now, key, n)
			return waits, d.RetryAfter
		})
	}
	if err == nil {
		l.noteTop(d, now, key, n)
		l.shadowed(d)
	}
	return now, err
}

// decide is the pipeline at a caller's time: it never waits, and reports
// a denial that only waits for the report (see Allow); the top keys count
// it; shadow mode lets it through like any other.
func (l *Limiter) decide(d *Decision, now int64, key string, n int64) (waits bool, err error) {
	if waits, err = l.take(d, now, key, n); err != nil {
		return false, err
	}
	l.noteTop(d, now, key, n)
	if l.shadowed(d) {
		waits = false
	}
	return waits, nil
}

// noteTop counts a keyed decision in the top keys, before shadow mode
// lets a denial through: in shadow mode the keys it would deny are the
// ones to see.
func (l *Limiter) noteTop(d *Decision, now int64, key string, n int64) {
	if l.top != nil && key != "" {
		l.top.record(l.hasher.Sum(key), key, n, d.Allowed, now)
	}
}

// shadowed turns a denial in d into a pass in shadow mode, and reports
// whether it did (shadow.go). The caller has checked that the decision
// made no error.
func (l *Limiter) shadowed(d *Decision) bool {
	return !d.Allowed && l.shadow != nil && l.letThrough(d)
}

// take decides into d, which saves copying a Decision up every level, and
// reports a wait for the report (see Allow).
func (l *Limiter) take(d *Decision, now int64, key string, n int64) (waits bool, err error) {
	if key == "" {
		if err := checkCost(l.rules.Default(), n); err != nil {
			return false, err
		}
		return l.dec.takeGlobal(d, now, n), nil
	}
	h := l.hasher.Sum(key)
	rule := l.keyRule(h, key, now)
	if err := checkCost(rule, n); err != nil {
		return false, err
	}
	return l.dec.takeKeyed(d, h, rule, now, n), nil
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
