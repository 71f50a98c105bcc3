package pacer

import (
	"context"
	"sync"
	"time"
)

// MaxPausedTargets bounds the targets a Pauses remembers at once.
const MaxPausedTargets = 4096

// Pauses remembers until when each target (a host, a gRPC target) asked
// its callers to send nothing, so that later calls wait instead of being
// refused. It holds at most MaxPausedTargets at once: past that, pauses
// that have ended make room, and a new target that still finds none goes
// unremembered (its callers learn again from its answers), while a target
// already held can always be paused longer. Transport keeps one; a pacer
// for another protocol (grpcpace.Pacer) can too. The zero value is ready;
// it is safe for concurrent use.
type Pauses struct {
	mu    sync.Mutex
	until map[string]time.Time // by target: nothing before
}

// Hold records that target asked for nothing before until; a pause
// already held that ends later stands.
func (p *Pauses) Hold(target string, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.until == nil {
		p.until = map[string]time.Time{}
	}
	if _, held := p.until[target]; !held && len(p.until) >= MaxPausedTargets {
		now := time.Now()
		for t, u := range p.until {
			if !u.After(now) {
				delete(p.until, t)
			}
		}
		if len(p.until) >= MaxPausedTargets {
			return
		}
	}
	if until.After(p.until[target]) {
		p.until[target] = until
	}
}

// Until is when target's pause ends, if one is held that has not ended
// (an ended one is forgotten).
func (p *Pauses) Until(target string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	until, ok := p.until[target]
	if ok && !until.After(time.Now()) {
		delete(p.until, target)
		return time.Time{}, false
	}
	return until, ok
}

// Wait waits while target's pause lasts, for at most longest; it returns
// the context's error if ctx ends first.
func (p *Pauses) Wait(ctx context.Context, target string, longest time.Duration) error {
	until, ok := p.Until(target)
	if !ok {
		return ctx.Err()
	}
	return sleep(ctx, min(time.Until(until), longest))
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
