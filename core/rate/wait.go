package rate

import (
	"context"
	"fmt"
	"time"
)

// Wait is WaitN(ctx, 1).
func (lim *Limiter) Wait(ctx context.Context) error { return lim.WaitN(ctx, 1) }

// WaitN blocks until n events may happen, spending their tokens. It
// returns an error, spending nothing, when n exceeds the burst (unless the
// limit is Inf), when ctx is done first, or at once when the tokens are
// due after ctx's deadline. It waits on a timer in the caller's
// goroutine and starts none.
func (lim *Limiter) WaitN(ctx context.Context, n int) error {
	lim.mu.Lock()
	burst, limit := lim.burst, lim.limit
	lim.mu.Unlock()
	if n > burst && limit != Inf {
		return fmt.Errorf("rate: WaitN(%d) asks for more than the burst, %d", n, burst)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if lim.cluster != nil {
		return lim.clusterWait(ctx, n)
	}
	now := time.Now()
	within := InfDuration
	if deadline, ok := ctx.Deadline(); ok {
		within = deadline.Sub(now)
	}
	r := lim.reserve(now, n, within)
	if !r.ok {
		return fmt.Errorf("rate: WaitN(%d) would wait past the context's deadline", n)
	}
	delay := r.DelayFrom(now)
	if delay == 0 {
		return nil
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		r.Cancel() // others may use what it booked
		return ctx.Err()
	}
}
