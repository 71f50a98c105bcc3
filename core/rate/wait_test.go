package rate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pedreviljoen/gopherpace/core/rate"
)

// Wait blocks for exactly the refill it needs, on a timer in the caller's
// goroutine: inside a synctest bubble, virtual time measures it, and the
// bubble would fail on a goroutine the Limiter left behind.
func TestWaitBlocksForTheRefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := rate.NewLimiter(10, 2)
		start := time.Now()
		for range 5 {
			if err := lim.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		// Two from the bucket, three at 100 ms each.
		if got := time.Since(start); got != 300*time.Millisecond {
			t.Fatalf("5 waits at 10/s with a burst of 2 took %v, want 300ms", got)
		}
	})
}

func TestWaitRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := rate.NewLimiter(10, 2)
		if err := lim.WaitN(t.Context(), 3); err == nil {
			t.Fatal("WaitN above the burst succeeded")
		}
		lim.WaitN(t.Context(), 2)
		ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := lim.WaitN(ctx, 2); err == nil || time.Since(start) != 0 {
			t.Fatalf("tokens due after the deadline: %v after %v, want an error at once", err, time.Since(start))
		}
		// Refused at once, nothing was booked: one token is due at 100 ms.
		if err := lim.WaitN(ctx, 1); err != nil || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("%v after %v, want nil at 100ms", err, time.Since(start))
		}
		done, stop := context.WithCancel(t.Context())
		stop()
		if err := lim.Wait(done); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait on a done context: %v", err)
		}
	})
}

// A Wait whose context ends gives its booking back, so the next caller
// does not wait for it.
func TestCancelledWaitGivesItsTokensBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := rate.NewLimiter(10, 1)
		lim.Wait(t.Context()) // empties the bucket
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		var err error
		wg.Go(func() { err = lim.WaitN(ctx, 1) }) // booked for 100 ms
		synctest.Wait()
		time.Sleep(50 * time.Millisecond)
		cancel()
		wg.Wait()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Wait: %v", err)
		}
		start := time.Now()
		lim.Wait(t.Context())
		if got := time.Since(start); got != 50*time.Millisecond {
			t.Fatalf("the next Wait took %v, want 50ms: the cancelled booking was not given back", got)
		}
	})
}
