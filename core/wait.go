package gopherpace

import (
	"context"
	"errors"
	"time"
)

// ErrWaitTooLong is returned by Wait when the tokens would not be free
// before the context's deadline: it returns at once instead of waiting in
// vain.
var ErrWaitTooLong = errors.New("gopherpace: the tokens would not be free before the context's deadline")

// Wait spends n tokens of key's bucket, waiting until they are free, as
// x/time/rate's WaitN does. It returns at once with ErrInvalidCost or
// ErrCostExceedsLimit for a cost the bucket can never grant, with
// ErrWaitTooLong when the tokens would come after ctx's deadline, and
// with ctx's error when ctx ends while it waits. It spends tokens only
// when it returns nil.
//
// Waiters are not served in order of arrival: each one takes the tokens
// as soon as they are free, and one that loses them to another caller
// waits again.
func (l *Limiter) Wait(ctx context.Context, key string, n int64) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var d Decision
		if _, err := l.decideNow(&d, key, n); err != nil || d.Allowed {
			if err == nil {
				l.counts.take(&d, n) // a wait counts once, as its outcome
			}
			return err
		}
		wait := d.RetryAfter
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			l.counts.take(&d, n)
			return ErrWaitTooLong
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
	}
}
