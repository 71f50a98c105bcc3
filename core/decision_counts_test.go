package gopherpace_test

import (
	"context"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// Stats counts every decision once: allowed requests and their tokens,
// denials, and shadow mode's passes apart.
func TestStatsCountDecisions(t *testing.T) {
	l := limiterOf(t, gopherpace.WithRate(10, time.Second), gopherpace.WithBucketSize(5))
	t0 := time.Unix(1_700_000_000, 0)
	l.AllowAt(t0)        // allowed, 1 token
	l.TakeAt(t0, "k", 3) // allowed, 3 tokens
	l.TakeAt(t0, "", 4)  // allowed, 4 tokens (global: 4 of the 4 left)
	l.AllowAt(t0)        // denied
	l.TakeAt(t0, "k", 3) // denied (2 left)
	l.TakeAt(t0, "k", 9) // an error: not counted
	other := limiterOf(t, gopherpace.WithRate(10, time.Second), gopherpace.WithBucketSize(5))
	both, _ := gopherpace.Combine(l, other)
	both.TakeAt(t0, []string{"k", "k"}, 2) // allowed on both
	both.TakeAt(t0, []string{"k", "k"}, 1) // denied by l
	s := l.Stats()
	if s.Allowed != 4 || s.TokensAllowed != 10 || s.Denied != 3 {
		t.Fatalf("allowed %d (%d tokens), denied %d; want 4 (10 tokens), 3", s.Allowed, s.TokensAllowed, s.Denied)
	}
	if s := other.Stats(); s.Allowed != 1 || s.Denied != 0 {
		t.Fatalf("the other limit: allowed %d, denied %d; want 1, 0", s.Allowed, s.Denied)
	}
	// Wait counts its outcome once, however long it waited.
	w := limiterOf(t, gopherpace.WithRate(1000, time.Second), gopherpace.WithBucketSize(1))
	for range 3 {
		if err := w.Wait(context.Background(), "", 1); err != nil {
			t.Fatal(err)
		}
	}
	if s := w.Stats(); s.Allowed != 3 || s.Denied != 0 {
		t.Fatalf("waits: allowed %d, denied %d; want 3, 0", s.Allowed, s.Denied)
	}
	// Shadow mode's passes are counted apart.
	sh := limiterOf(t, gopherpace.WithRate(1, time.Second), gopherpace.WithShadowMode(), gopherpace.WithLogger(discardLogger))
	for range 3 {
		sh.AllowAt(t0)
	}
	if s := sh.Stats(); s.Allowed != 1 || s.Denied != 0 || s.ShadowDenials != 2 {
		t.Fatalf("shadow: %+v", s)
	}
}

// Counting costs no allocation.
func TestCountingAllocatesNothing(t *testing.T) {
	l := limiterOf(t, gopherpace.WithRate(1e9, time.Second), gopherpace.WithBucketSize(1e9))
	if n := testing.AllocsPerRun(1000, func() { l.Allow() }); n != 0 {
		t.Fatalf("Allow allocates %.0f times", n)
	}
}
