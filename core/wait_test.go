package gopherpace_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

func TestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := gopherpace.New(gopherpace.WithRate(2, time.Second), gopherpace.WithBucketSize(2))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx := context.Background()
		start := time.Now()
		for range 2 {
			if err := l.Wait(ctx, "k", 1); err != nil {
				t.Fatal(err)
			}
		}
		if time.Since(start) != 0 {
			t.Fatalf("the bucket's tokens took %v", time.Since(start))
		}
		// The third waits for the next token: 500 ms at 2/s.
		if err := l.Wait(ctx, "k", 1); err != nil || time.Since(start) != 500*time.Millisecond {
			t.Fatalf("third: %v after %v, want nil after 500ms", err, time.Since(start))
		}
		// A deadline before the tokens: at once, and nothing spent.
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		before := time.Now()
		if err := l.Wait(short, "k", 2); !errors.Is(err, gopherpace.ErrWaitTooLong) || time.Since(before) != 0 {
			t.Fatalf("too long: %v after %v, want ErrWaitTooLong at once", err, time.Since(before))
		}
		if d := l.Peek("k"); d.Remaining != 0 || d.RetryAfter != 500*time.Millisecond {
			t.Fatalf("after the refused wait: %+v; it must not have spent", d)
		}
		// Costs the bucket can never grant fail at once.
		if err := l.Wait(ctx, "k", 3); !errors.Is(err, gopherpace.ErrCostExceedsLimit) {
			t.Fatalf("cost 3 of 2: %v", err)
		}
		if err := l.Wait(ctx, "k", 0); !errors.Is(err, gopherpace.ErrInvalidCost) {
			t.Fatalf("cost 0: %v", err)
		}
		// Cancelled while waiting: the context's error, nothing spent.
		cctx, cancelWait := context.WithCancel(ctx)
		go func() {
			time.Sleep(200 * time.Millisecond)
			cancelWait()
		}()
		if err := l.Wait(cctx, "k", 2); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: %v", err)
		}
		time.Sleep(800 * time.Millisecond) // 1 s after the third: the bucket is full
		if d, _ := l.Take("k", 2); !d.Allowed {
			t.Fatalf("after the cancelled wait the bucket is not full: %+v", d)
		}
	})
}

// Many waiters share the rate: over 3 s at 10/s with a bucket of 5, 20
// goroutines waiting for one token each get 35 in all, no more.
func TestWaitersShareTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := gopherpace.New(gopherpace.WithRate(10, time.Second), gopherpace.WithBucketSize(5))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		got := make(chan int, 20)
		for range 20 {
			go func() {
				n := 0
				for l.Wait(ctx, "", 1) == nil {
					n++
				}
				got <- n
			}()
		}
		total := 0
		for range 20 {
			total += <-got
		}
		if total < 34 || total > 35 {
			t.Fatalf("waiters got %d tokens in 3 s, want 35 (5 + 10/s × 3 s)", total)
		}
	})
}
