package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pedreviljoen/gopherpace/core/pacer"
)

// A call to a paused target waits until the pause ends, at most the
// longest wait; a shorter pause does not cut a longer one; another target
// does not wait; a context that ends first ends the wait.
func TestPausesHoldCallsUntilTheyEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p pacer.Pauses
		start := time.Now()
		p.Hold("api", start.Add(3*time.Second))
		p.Hold("api", start.Add(time.Second)) // shorter: the longer stands
		if err := p.Wait(context.Background(), "api", time.Minute); err != nil || time.Since(start) != 3*time.Second {
			t.Fatalf("waited %v (%v), want 3s", time.Since(start), err)
		}
		p.Hold("api", time.Now().Add(time.Hour))
		at := time.Now()
		if err := p.Wait(context.Background(), "api", 10*time.Second); err != nil || time.Since(at) != 10*time.Second {
			t.Fatalf("waited %v (%v), want the longest, 10s", time.Since(at), err)
		}
		at = time.Now()
		if err := p.Wait(context.Background(), "other", time.Minute); err != nil || time.Since(at) != 0 {
			t.Fatalf("an unpaused target waited %v (%v)", time.Since(at), err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := p.Wait(ctx, "api", time.Minute); !errors.Is(err, context.DeadlineExceeded) || time.Since(at) != 2*time.Second {
			t.Fatalf("a context ending after 2s: %v after %v", err, time.Since(at))
		}
	})
}

// Pauses stay bounded: past MaxPausedTargets a new target goes
// unremembered, a target already held can still be paused longer, and
// pauses that have ended make room.
func TestPausesStayBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p pacer.Pauses
		start := time.Now()
		for i := range pacer.MaxPausedTargets {
			p.Hold(fmt.Sprint("host-", i), start.Add(time.Minute))
		}
		p.Hold("one-too-many", start.Add(time.Minute))
		if err := p.Wait(context.Background(), "one-too-many", time.Hour); err != nil || time.Since(start) != 0 {
			t.Fatalf("a target past the bound waited %v (%v)", time.Since(start), err)
		}
		p.Hold("host-0", start.Add(2*time.Minute))
		if err := p.Wait(context.Background(), "host-0", time.Hour); err != nil || time.Since(start) != 2*time.Minute {
			t.Fatalf("a held target, paused longer at the bound, waited %v (%v), want 2m", time.Since(start), err)
		}
		// Every pause but host-0's has ended: room again.
		p.Hold("newcomer", time.Now().Add(time.Second))
		at := time.Now()
		if err := p.Wait(context.Background(), "newcomer", time.Hour); err != nil || time.Since(at) != time.Second {
			t.Fatalf("a newcomer after the pauses ended waited %v (%v), want 1s", time.Since(at), err)
		}
	})
}
