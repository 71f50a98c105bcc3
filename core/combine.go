package gopherpace

import (
	"errors"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

// Limits are several limits a request must pass together, such as 10 a
// second per client IP and 100 an hour per API key: a request is admitted
// only when every limit has the tokens, and then it spends from each; when
// any limit denies, it spends nothing. Each limit has a key of its own,
// given in order to each call. Limits are safe for concurrent use; Close
// each Limiter, not the Limits.
//
// Clustered, a denial gives back what the limits before it took; tokens a
// flush had already reported in the few microseconds between stay spent
// on the peers (less admitted, never more).
type Limits struct{ parts []*Limiter }

// Combine returns the Limits of limiters, in order. It needs at least one
// limiter and refuses nil or repeated ones.
func Combine(limiters ...*Limiter) (*Limits, error) {
	if len(limiters) == 0 {
		return nil, errorf("Combine needs at least one Limiter")
	}
	ls := &Limits{parts: limiters}
	for i, l := range limiters {
		if l == nil {
			return nil, errorf("Combine: limiter %d is nil", i)
		}
		for _, o := range limiters[:i] {
			if o == l {
				return nil, errorf("Combine: limiter %d is given twice", i)
			}
		}
	}
	return ls, nil
}

// Limiters are the combined limiters, in order.
func (ls *Limits) Limiters() []*Limiter { return ls.parts }

// ErrKeys is returned when a call to Limits gives a key count other than
// the number of limiters.
var ErrKeys = errors.New("gopherpace: one key is needed per combined limiter")

// Take spends n tokens from every limit, keys[i] naming the bucket of the
// i-th limiter, or from none. The Decision is the limit closest to
// exhaustion: on a denial, the one whose tokens come last (RetryAfter is
// when every limit has them); otherwise the one with the fewest tokens
// left. It waits for the report as Limiter.Take does.
func (ls *Limits) Take(keys []string, n int64) (Decision, error) {
	d, _, err := ls.TakeAll(keys, n, nil)
	return d, err
}

// TakeAt is Take at the given time. It never waits.
func (ls *Limits) TakeAt(now time.Time, keys []string, n int64) (Decision, error) {
	var d Decision
	_, by, err := ls.take(&d, now, keys, n, nil)
	if err == nil {
		ls.count(&d, by, n)
	}
	return d, err
}

// TakeAll is Take, also writing each limit's own Decision into all (when
// it has a slot per limiter), for fields that describe every rule, and
// returning the time of the decision as Limiter.TakeTimed does. A limit
// after the one that denied is read, not spent from.
func (ls *Limits) TakeAll(keys []string, n int64, all []Decision) (Decision, time.Time, error) {
	var d Decision
	// One monotonic clock read serves every limit: a time built from an
	// epoch keeps the epoch's monotonic reading, so it converts exactly
	// into each limiter's own.
	epoch := ls.parts[0].epoch
	first := int64(time.Since(epoch))
	now := epoch.Add(time.Duration(first))
	waits, by, err := ls.take(&d, now, keys, n, all)
	if waits {
		last := waitForReport(epoch, first, d.RetryAfter, func(at int64) (bool, time.Duration) {
			now = epoch.Add(time.Duration(at))
			waits, by, err = ls.take(&d, now, keys, n, all)
			return waits, d.RetryAfter
		})
		now = epoch.Add(time.Duration(last))
	}
	if err == nil {
		ls.count(&d, by, n)
	}
	return d, now, err
}

// count counts a combined decision on every limit: an admit on each, a
// denial on the one that denied (by).
func (ls *Limits) count(d *Decision, by int, n int64) {
	if by < 0 {
		for _, l := range ls.parts {
			l.counts.take(d, n)
		}
		return
	}
	ls.parts[by].counts.take(d, n)
}

// Refund gives back n tokens to every limit's bucket, as Limiter.Refund
// does, for a request that was admitted but should not count; it returns
// the errors of the limits that refused (ErrRefundExceedsSpent), joined.
func (ls *Limits) Refund(keys []string, n int64) error {
	if len(keys) != len(ls.parts) {
		return errorf("Refund: %d keys for %d limits", len(keys), len(ls.parts))
	}
	now := time.Now()
	var errs []error
	for i, l := range ls.parts {
		if err := l.refund(l.nanos(now), keys[i], n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// take decides for every limit at now into d, and each limit's own
// decision into all when it has room; it reports a wait for the report as Limiter.take
// does, and the limit that denied (-1: admitted).
func (ls *Limits) take(d *Decision, now time.Time, keys []string, n int64, all []Decision) (waits bool, by int, err error) {
	if len(keys) != len(ls.parts) {
		return false, -1, ErrKeys
	}
	// Costs first: a cost one limit can never grant must spend nothing.
	for i, l := range ls.parts {
		if err := checkCost(l.ruleFor(keys[i], l.nanos(now)), n); err != nil {
			return false, -1, err
		}
	}
	var one Decision
	each := func(i int) *Decision {
		if len(all) == len(ls.parts) {
			return &all[i]
		}
		one = Decision{}
		return &one
	}
	*d = Decision{}
	denied := -1
	for i, l := range ls.parts {
		di := each(i)
		h, _ := l.take(di, l.nanos(now), keys[i], n) // costs checked above
		if l.shadowed(di) {
			h = false
		}
		if !di.Allowed {
			denied, waits = i, h
			*d = *di
			break
		}
		d.Shadowed = d.Shadowed || di.Shadowed
		if i == 0 || closer(di, d) {
			shadowed := d.Shadowed
			*d = *di
			d.Shadowed = shadowed
		}
	}
	if denied < 0 {
		return false, -1, nil
	}
	// Give back what the limits before the denial took, and read the ones
	// after it: the request must wait for the last of them.
	for i := range denied {
		_ = ls.parts[i].refund(ls.parts[i].nanos(now), keys[i], n) // what it just took: never refused
	}
	for i := denied + 1; i < len(ls.parts); i++ {
		di := each(i)
		*di = ls.parts[i].peek(ls.parts[i].nanos(now), keys[i], n)
		if !di.Allowed && di.RetryAfter > d.RetryAfter {
			d.RetryAfter = di.RetryAfter
		}
	}
	return waits, denied, nil
}

// closer reports whether a is closer to exhaustion than b: fewer tokens
// left, or as few and longer to refill.
func closer(a, b *Decision) bool {
	return a.Remaining < b.Remaining || a.Remaining == b.Remaining && a.ResetAfter > b.ResetAfter
}

// ruleFor is the rule of key's bucket at now.
func (l *Limiter) ruleFor(key string, now int64) *bucket.Rule {
	if key == "" || !l.rules.HasOverrides() {
		return l.rules.Default()
	}
	return l.keyRule(l.hasher.Sum(key), key, now)
}
