package gopherpace_test

import (
	"errors"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

func combined(t testing.TB, limiters ...*gopherpace.Limiter) *gopherpace.Limits {
	t.Helper()
	ls, err := gopherpace.Combine(limiters...)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func limiterOf(t testing.TB, opts ...gopherpace.Option) *gopherpace.Limiter {
	t.Helper()
	l, err := gopherpace.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// 3 a second per IP and 5 an hour per API key: a request passes only with
// both, and a request one limit denies spends nothing from the other.
func TestLimitsAllOrNothing(t *testing.T) {
	perIP := limiterOf(t, gopherpace.WithRate(3, time.Second))
	perKey := limiterOf(t, gopherpace.WithRate(5, time.Hour))
	both := combined(t, perIP, perKey)
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 3 {
		d, err := both.TakeAt(t0, []string{"198.51.100.1", "key-a"}, 1)
		if err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v %v", i, d, err)
		}
		// The per-IP bucket is the one closer to exhaustion.
		if d.BucketSize != 3 || d.Remaining != int64(2-i) {
			t.Fatalf("request %d reports %+v, want the per-IP limit", i, d)
		}
	}
	d, _ := both.TakeAt(t0, []string{"198.51.100.1", "key-a"}, 1)
	if d.Allowed || d.BucketSize != 3 {
		t.Fatalf("fourth from one IP: %+v, want the per-IP denial", d)
	}
	if got := perKey.PeekAt(t0, "key-a").Remaining; got != 2 {
		t.Fatalf("the key has %d tokens left, want 2: the denied request spent from it", got)
	}
	// Another IP with the same key: the key's limit decides now.
	for i := range 2 {
		if d, _ := both.TakeAt(t0, []string{"198.51.100.2", "key-a"}, 1); !d.Allowed {
			t.Fatalf("second IP, request %d denied", i)
		}
	}
	d, _ = both.TakeAt(t0, []string{"198.51.100.2", "key-a"}, 1)
	if d.Allowed || d.BucketSize != 5 || d.RetryAfter != 12*time.Minute {
		t.Fatalf("key spent: %+v, want the per-key denial, a token in 12 min", d)
	}
	if got := perIP.PeekAt(t0, "198.51.100.2").Remaining; got != 1 {
		t.Fatalf("the second IP has %d tokens left, want 1", got)
	}
}

// A denial's RetryAfter is when every limit has the tokens, and TakeAll
// reports each limit.
func TestLimitsRetryAfterIsTheLastLimit(t *testing.T) {
	a := limiterOf(t, gopherpace.WithRate(1, time.Second), gopherpace.WithBucketSize(1))
	b := limiterOf(t, gopherpace.WithRate(1, time.Minute), gopherpace.WithBucketSize(1))
	both := combined(t, a, b)
	keys := []string{"k", "k"}
	all := make([]gopherpace.Decision, 2)
	if d, _, _ := both.TakeAll(keys, 1, all); !d.Allowed || !all[0].Allowed || !all[1].Allowed {
		t.Fatalf("first: %+v %+v", d, all)
	}
	d, _, _ := both.TakeAll(keys, 1, all)
	if d.Allowed || all[0].Allowed || all[1].Allowed || d.RetryAfter < 59*time.Second {
		t.Fatalf("second: %+v, each %+v; want a denial until the minute's token", d, all)
	}
}

func TestLimitsErrorsSpendNothing(t *testing.T) {
	a := limiterOf(t, gopherpace.WithRate(10, time.Second))
	b := limiterOf(t, gopherpace.WithRate(10, time.Second), gopherpace.WithBucketSize(2))
	both := combined(t, a, b)
	if _, err := both.Take([]string{"k", "k"}, 3); !errors.Is(err, gopherpace.ErrCostExceedsLimit) {
		t.Fatalf("cost 3 against a bucket of 2: %v", err)
	}
	if got := a.Peek("k").Remaining; got != 10 {
		t.Fatalf("the first limit lost tokens to a cost the second can never grant: %d left", got)
	}
	if _, err := both.Take([]string{"k"}, 1); !errors.Is(err, gopherpace.ErrKeys) {
		t.Fatalf("one key for two limits: %v", err)
	}
	for _, bad := range [][]*gopherpace.Limiter{nil, {a, nil}, {a, a}} {
		if _, err := gopherpace.Combine(bad...); err == nil {
			t.Errorf("Combine(%v): no error", bad)
		}
	}
}

// A limit in shadow mode counts but never blocks the others.
func TestLimitsWithAShadowPart(t *testing.T) {
	strict := limiterOf(t, gopherpace.WithRate(1, time.Second), gopherpace.WithShadowMode(), gopherpace.WithLogger(discardLogger))
	loose := limiterOf(t, gopherpace.WithRate(100, time.Second))
	both := combined(t, strict, loose)
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 5 {
		d, _ := both.TakeAt(t0, []string{"k", "k"}, 1)
		if !d.Allowed || d.Shadowed != (i > 0) {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	if got := loose.PeekAt(t0, "k").Remaining; got != 95 {
		t.Fatalf("the enforced limit has %d left, want 95", got)
	}
}

// Across any sequence of requests, times and costs, a combined request
// either spends n from every limit or nothing from any, and no limit
// admits more than it allows on its own.
func FuzzLimitsAllOrNothing(f *testing.F) {
	f.Add([]byte{1, 0, 1, 2, 0, 3, 255, 1, 7, 0, 0, 9})
	f.Fuzz(func(t *testing.T, ops []byte) {
		lims := []*gopherpace.Limiter{
			limiterOf(t, gopherpace.WithRate(5, time.Second), gopherpace.WithBucketSize(4)),
			limiterOf(t, gopherpace.WithRate(3, time.Minute), gopherpace.WithBucketSize(6)),
			limiterOf(t, gopherpace.WithRate(50, time.Hour), gopherpace.WithBucketSize(3), gopherpace.WithOverrideRate("k1", 1, time.Hour, 2)),
		}
		ls := combined(t, lims...)
		now := time.Unix(1_700_000_000, 0)
		for i := 0; i+2 < len(ops); i += 3 {
			now = now.Add(time.Duration(ops[i]) * 10 * time.Millisecond)
			keys := []string{"k" + string('0'+ops[i+1]%3), "k" + string('0'+ops[i+1]/3%2), "k" + string('0'+ops[i+1]/6%2)}
			n := int64(ops[i+2]%4) + 1
			before := make([]gopherpace.Decision, len(lims))
			for j, l := range lims {
				before[j] = l.PeekAt(now, keys[j])
			}
			d, err := ls.TakeAt(now, keys, n)
			for j, l := range lims {
				after := l.PeekAt(now, keys[j])
				spent := before[j].Remaining - after.Remaining
				switch {
				case err != nil || !d.Allowed:
					if spent != 0 {
						t.Fatalf("op %d: denied (%v, %v) but limit %d lost %d tokens", i/3, d, err, j, spent)
					}
				case spent != n:
					t.Fatalf("op %d: admitted %d tokens but limit %d lost %d", i/3, n, j, spent)
				}
			}
		}
	})
}
