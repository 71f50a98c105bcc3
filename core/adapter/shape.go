package adapter

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// shaper is a gate's traffic shaping: requests that would rather wait a
// little than be refused (Settings.MaxDelay, MaxQueue).
type shaper struct {
	maxDelay time.Duration
	maxQueue int64
	queued   *atomic.Int64 // requests waiting now
}

func newShaper(s Settings) (shaper, error) {
	switch {
	case s.MaxDelay < 0 || s.MaxQueue < 0:
		return shaper{}, errors.New("MaxDelay and MaxQueue must not be negative")
	case s.MaxQueue > 0 && s.MaxDelay == 0:
		return shaper{}, errors.New("a queue (WithMaxQueue) needs a delay to wait for (WithMaxDelay)")
	case s.MaxDelay > 0 && len(s.Also) > 0:
		// Booking ahead on several limits could not be all or nothing: one
		// limit's booking would fall due while another's was refused.
		return shaper{}, errors.New("WithMaxDelay does not combine with WithAlso: shape one limit, or refuse at once")
	}
	return shaper{maxDelay: s.MaxDelay, maxQueue: int64(s.MaxQueue), queued: new(atomic.Int64)}, nil
}

// Shapes reports whether the gate shapes traffic (MaxDelay): Flow.Decide
// then calls Shape instead of Decide, and needs the request's context.
func (g *Gate) Shapes() bool { return g.maxDelay > 0 }

// Queued is how many requests wait for their tokens now.
func (g *Gate) Queued() int64 { return g.queued.Load() }

// Shape decides r as Decide does, except that a request whose tokens are
// due within the gate's MaxDelay waits for them, on a timer in the
// caller's goroutine, instead of being denied, unless MaxQueue requests
// wait already. The tokens are booked when it starts waiting, so waiting
// requests go in the order they came (Limiter.Reserve); one whose ctx ends
// first gives its booking back and is denied. Its errors are the
// limiter's cost errors.
func (g *Gate) Shape(ctx context.Context, r *Request) error {
	key := r.Key(0)
	wait, ok, err := g.l.Reserve(key, r.Cost, g.maxDelay)
	if err != nil {
		return err
	}
	if ok && wait > 0 {
		ok = g.await(ctx, wait)
		if !ok {
			_ = g.l.Refund(key, r.Cost)
		}
	}
	r.d = g.l.Peek(key)
	r.d.Allowed = ok
	if ok {
		r.d.RetryAfter = 0
	}
	if g.absolute {
		r.at = time.Now()
	}
	return nil
}

// await waits d in the queue, and reports false, having waited nothing,
// when the queue is full, or when ctx ends first.
func (g *Gate) await(ctx context.Context, d time.Duration) bool {
	if n := g.queued.Add(1); g.maxQueue > 0 && n > g.maxQueue {
		g.queued.Add(-1)
		return false
	}
	defer g.queued.Add(-1)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
