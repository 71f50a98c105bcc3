package gopherpace

import (
	"errors"
	"fmt"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

var (
	// ErrChargeDropped is returned for a charge to a key that the keyed
	// store found no room for: the tokens were not spent.
	ErrChargeDropped = errors.New("gopherpace: no room for the key's bucket; the charge was dropped")
	// ErrChargeCapped is returned for a charge that the cap on debt cut
	// short: the bucket is a whole bucket beyond empty, and part of the
	// charge, said in the error, was not spent.
	ErrChargeCapped = errors.New("gopherpace: the cap on debt cut the charge short")
)

// A CappedChargeError is a charge that the cap on debt cut short: it
// spent Spent of the Asked tokens. It matches ErrChargeCapped.
type CappedChargeError struct{ Spent, Asked int64 }

func (e *CappedChargeError) Error() string {
	return fmt.Sprintf("%v: %d of %d tokens spent", ErrChargeCapped, e.Spent, e.Asked)
}

// Is makes errors.Is(err, ErrChargeCapped) hold.
func (e *CappedChargeError) Is(target error) bool { return target == ErrChargeCapped }

// Charge spends n tokens from key's bucket whether or not it holds them,
// for a cost known only after the work is done: the tokens of an LLM
// response, bytes sent, CPU time. A bucket that runs out goes into debt,
// and refill repays the debt before the key is admitted again. The debt
// is capped at one bucket beyond empty: what a charge would add past the
// cap is not spent, so no caller can shut a key out for more than two
// windows. Clustered, a charge is reported to peers like an admit.
//
// It returns how long refill takes to repay the debt the bucket is in
// after the charge: zero when the bucket held the tokens. A charge the
// cap cut short also returns a *CappedChargeError (ErrChargeCapped),
// saying how many tokens it spent; the owed time is still the bucket's. A charge of 0
// spends nothing and reports the current debt; a negative one is
// ErrInvalidCost. Shadow mode spends charges too: they measure, not
// decide.
//
// The usual pattern, for a cost per request not known in advance:
//
//	if !limiter.Peek(key).Allowed { deny }
//	... serve the request, measuring its cost ...
//	limiter.Charge(key, cost)
func (l *Limiter) Charge(key string, n int64) (owed time.Duration, err error) {
	return l.charge(int64(time.Since(l.epoch)), key, n)
}

// ChargeAt is Charge at the given time.
func (l *Limiter) ChargeAt(now time.Time, key string, n int64) (owed time.Duration, err error) {
	return l.charge(l.nanos(now), key, n)
}

func (l *Limiter) charge(now int64, key string, n int64) (time.Duration, error) {
	if n < 0 {
		return 0, fmt.Errorf("%w: a charge of %d tokens", ErrInvalidCost, n)
	}
	var (
		ahead, charged int64
		ok             = true
		rule           = l.rules.Default()
	)
	if n == 0 {
		var tat int64
		var at bucket.Time
		if key == "" {
			tat, at, _ = l.dec.peekGlobal(now)
		} else {
			h := l.hasher.Sum(key)
			rule = l.keyRule(h, key, now)
			tat, at = l.dec.peekKeyed(h, now)
		}
		ahead = tat - int64(at)
	} else if key == "" {
		charged, ahead = l.dec.chargeGlobal(now, n)
	} else {
		h := l.hasher.Sum(key)
		rule = l.keyRule(h, key, now)
		charged, ahead, ok = l.dec.chargeKeyed(h, rule, now, n)
	}
	if !ok {
		return 0, ErrChargeDropped
	}
	owed := time.Duration(max(ahead-rule.Tolerance, 0))
	if charged < n {
		return owed, &CappedChargeError{Spent: charged, Asked: n}
	}
	return owed, nil
}

// chargeGlobal and chargeKeyed spend n tokens whether or not the bucket
// holds them (Charge), and return the tokens spent (fewer than n where the
// cap cut the charge) and how far ahead of now the bucket's time is after
// it; chargeKeyed reports false when the store had no room.
func (d *decider) chargeGlobal(now, n int64) (charged, ahead int64) {
	if d.eng != nil {
		return d.eng.ChargeGlobal(now, n)
	}
	return d.solo.chargeGlobal(now, n)
}

func (d *decider) chargeKeyed(h uint64, rule *bucket.Rule, now, n int64) (charged, ahead int64, ok bool) {
	if d.eng != nil {
		return d.eng.ChargeKeyed(h, rule, now, n)
	}
	return d.solo.chargeKeyed(h, rule, now, n)
}

func (s *standalone) chargeGlobal(now, n int64) (int64, int64) {
	rule := s.rules.Default()
	return bucket.Debit(&s.global.TAT, rule, bucket.StandaloneTime(now), n, bucket.ChargeDebt(rule))
}

func (s *standalone) chargeKeyed(h uint64, rule *bucket.Rule, now, n int64) (int64, int64, bool) {
	e, charged, ahead := s.keys.Debit(h, rule, bucket.StandaloneTime(now), n, bucket.ChargeDebt(rule))
	return charged, ahead, e != nil
}
