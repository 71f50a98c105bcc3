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

// maxChargeDebt is how far beyond empty charges may take a bucket, in
// buckets: one, the same cap peers' reports have (engine.maxDebt), so a
// key charged any amount is admitted again within two windows.
const maxChargeDebt = 1

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
		rule           = l.rules.dflt()
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

// chargeDebt is how far beyond empty a charge may take a bucket of rule, in
// ns.
func chargeDebt(rule *bucket.Rule) int64 { return maxChargeDebt * rule.Tolerance }

// chargeGlobal and chargeKeyed spend n tokens whether or not the bucket
// holds them (Charge), and return the tokens spent (fewer than n where the
// cap cut the charge) and how far ahead of now the bucket's time is after
// it; chargeKeyed reports false when the store had no room.
func (d *decider) chargeGlobal(now, n int64) (charged, ahead int64) {
	if d.eng != nil {
		return d.eng.chargeGlobal(now, n)
	}
	return d.solo.chargeGlobal(now, n)
}

func (d *decider) chargeKeyed(h uint64, rule *bucket.Rule, now, n int64) (charged, ahead int64, ok bool) {
	if d.eng != nil {
		return d.eng.chargeKeyed(h, rule, now, n)
	}
	return d.solo.chargeKeyed(h, rule, now, n)
}

func (s *standalone) chargeGlobal(now, n int64) (int64, int64) {
	rule := s.rules.dflt()
	return bucket.Debit(&s.global.TAT, rule, standaloneTime(now), n, chargeDebt(rule))
}

func (s *standalone) chargeKeyed(h uint64, rule *bucket.Rule, now, n int64) (int64, int64, bool) {
	e, charged, ahead := s.keys.Debit(h, rule, standaloneTime(now), n, chargeDebt(rule))
	return charged, ahead, e != nil
}

// chargeGlobal charges the counted word and counts what it spent for
// gossip; once the limiter has closed, the standalone word takes it.
func (e *engine) chargeGlobal(now, n int64) (int64, int64) {
	rule, at := e.rules.dflt(), e.bucketTime(now)
	charged, count, ahead, ok := e.word.charge(rule, at, n, chargeDebt(rule))
	if !ok {
		return bucket.Debit(e.standalone, rule, standaloneTime(now), n, chargeDebt(rule))
	}
	if charged > 0 && e.mode.get() != modeStopped {
		e.send.counted(count, charged, rule)
	}
	return charged, ahead
}

func (e *engine) chargeKeyed(h uint64, rule *bucket.Rule, now, n int64) (int64, int64, bool) {
	ent, charged, ahead := e.keys.Debit(h, rule, e.bucketTime(now), n, chargeDebt(rule))
	if ent == nil {
		return 0, 0, false
	}
	if charged > 0 {
		e.countKeyed(h, ent, rule, charged)
	}
	return charged, ahead, true
}
