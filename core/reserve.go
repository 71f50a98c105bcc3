package gopherpace

import (
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/cluster"
)

// Reserve books n tokens of key's bucket for a caller that would rather
// wait than be refused: traffic shaping. Tokens there now are spent at
// once (wait 0). Tokens that refill will bring within the given time are
// spent ahead, the bucket running into debt that refill repays, and wait
// is how long the caller must wait before acting on them: bookings are
// due in the order they were made. Tokens due later than that are not
// booked: ok is false and nothing is spent. within is held to one window
// (the bucket's size at its rate) or 30 s, whichever is longer; clustered,
// to one window, the debt peers carry for a booking.
//
// A caller that gives up before its time (its context ended) gives the
// tokens back with Refund. Clustered, a booking counts for gossip and
// against this node's cap of unreported admits like any admit, so the
// cluster's bookings keep the bound its admits keep. Like Take, it waits
// a few milliseconds for its report where the cap says so (see Allow);
// ReserveAt does not, and refuses instead. In shadow mode a booking never
// makes a caller wait: what it would have refused or delayed is let
// through at once and counted as shadow mode counts a denial.
//
// The error is for a cost below 1 or above the key's bucket size.
func (l *Limiter) Reserve(key string, n int64, within time.Duration) (wait time.Duration, ok bool, err error) {
	now := int64(time.Since(l.epoch))
	wait, ok, waits, err := l.reserve(now, key, n, within)
	if waits {
		waitForReport(l.epoch, now, cluster.ReportRetry, func(now int64) (bool, time.Duration) {
			wait, ok, waits, err = l.reserve(now, key, n, within)
			return waits, cluster.ReportRetry
		})
	}
	return l.shaped(wait, ok, n, err)
}

// ReserveAt is Reserve at the given time. It never waits, and refuses a
// booking that must wait for this node's report.
func (l *Limiter) ReserveAt(now time.Time, key string, n int64, within time.Duration) (wait time.Duration, ok bool, err error) {
	wait, ok, _, err = l.reserve(l.nanos(now), key, n, within)
	return l.shaped(wait, ok, n, err)
}

// shaped counts a booking's outcome, and in shadow mode lets a refused or
// delayed one through at once.
func (l *Limiter) shaped(wait time.Duration, ok bool, n int64, err error) (time.Duration, bool, error) {
	if err != nil {
		return 0, false, err
	}
	d := Decision{Allowed: ok && wait == 0}
	if l.shadow != nil && !d.Allowed {
		if ok { // booked ahead: a shadow limiter never delays
			l.noteShadowDenial()
			l.counts.take(&Decision{Allowed: true, Shadowed: true}, n)
			return 0, true, nil
		}
		l.letThrough(&d)
		l.counts.take(&d, n)
		return 0, true, nil
	}
	d.Allowed = ok
	l.counts.take(&d, n)
	return wait, ok, nil
}

// reserve books n tokens at now (see Reserve); waits reports a refusal
// that only waits for this node's report.
func (l *Limiter) reserve(now int64, key string, n int64, within time.Duration) (wait time.Duration, ok, waits bool, err error) {
	rule := l.rules.Default()
	var h uint64
	if key != "" {
		h = l.hasher.Sum(key)
		rule = l.keyRule(h, key, now)
	}
	if err := checkCost(rule, n); err != nil {
		return 0, false, false, err
	}
	ahead := min(max(int64(within), 0), rule.Reach)
	var w int64
	if key == "" {
		w, ok, waits = l.dec.reserveGlobal(now, n, ahead)
	} else {
		w, ok, waits = l.dec.reserveKeyed(h, rule, now, n, ahead)
	}
	return time.Duration(w), ok, waits, nil
}

// reserveGlobal and reserveKeyed book n tokens at now due within ahead ns
// of the time a take could have them (Reserve); they return the wait,
// whether it was booked, and a refusal that only waits for the report.
func (d *decider) reserveGlobal(now, n, ahead int64) (wait int64, ok, waits bool) {
	if d.eng != nil {
		return d.eng.ReserveGlobal(now, n, ahead)
	}
	wait, ok, _ = bucket.Reserve(&d.solo.global.TAT, d.solo.rules.Default(), bucket.StandaloneTime(now), n, ahead)
	return wait, ok, false
}

func (d *decider) reserveKeyed(h uint64, rule *bucket.Rule, now, n, ahead int64) (wait int64, ok, waits bool) {
	if d.eng != nil {
		return d.eng.ReserveKeyed(h, rule, now, n, ahead)
	}
	at := bucket.StandaloneTime(now)
	for {
		e := d.solo.keys.Get(h, at)
		if e == nil {
			return 0, false, false
		}
		if wait, ok, alive := bucket.Reserve(&e.TAT, rule, at, n, ahead); alive {
			return wait, ok, false
		}
		// Evicted between lookup and booking: look again.
	}
}
