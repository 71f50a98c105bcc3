package gopherpace

import (
	"testing"
	"time"
)

// A faster rate takes effect at once: the tokens a bucket has spent are
// repriced, so nothing stalls on debt counted at the old rate; a slower
// rate never hands out a token. Global and keyed buckets alike.
func TestSetRateRepricesWithoutStalling(t *testing.T) {
	l := newTestLimiter(t, WithRate(10, time.Second))
	now := int64(time.Hour)
	for _, key := range []string{"", "tenant"} {
		for range 10 {
			var d Decision
			l.take(&d, now, key, 1)
		}
	}
	if err := l.setRate(now, 100, time.Second, 10); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"", "tenant"} {
		// 10 tokens spent at 10 ms each now: one is back after 10 ms.
		var d Decision
		l.take(&d, now+int64(10*time.Millisecond), key, 1)
		if !d.Allowed {
			t.Fatalf("%q: denied 10 ms after a 10× faster rate (%+v): it stalled on old debt", key, d)
		}
		if tokens, per := l.Rate(); tokens != 100 || per != time.Second {
			t.Fatalf("Rate() = %d per %v", tokens, per)
		}
	}
	// Slower again: the bucket's spent tokens (10) keep it empty, and a
	// token takes the new 100 ms.
	if err := l.setRate(now+int64(10*time.Millisecond), 10, time.Second, 10); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"", "tenant"} {
		var d Decision
		l.take(&d, now+int64(10*time.Millisecond), key, 1)
		if d.Allowed || d.RetryAfter != 100*time.Millisecond {
			t.Fatalf("%q after slowing down: %+v, want a denial with RetryAfter 100ms", key, d)
		}
	}
}

// A smaller bucket caps what was spent; a bigger one adds room at once.
func TestSetRateBucketSize(t *testing.T) {
	l := newTestLimiter(t, WithRate(1, time.Second), WithBucketSize(10))
	now := int64(time.Hour)
	var d Decision
	l.take(&d, now, "k", 4) // 6 left
	if err := l.setRate(now, 1, time.Second, 20); err != nil {
		t.Fatal(err)
	}
	l.take(&d, now, "k", 16) // 20 − 4 spent
	if !d.Allowed || d.Remaining != 0 {
		t.Fatalf("bigger bucket: %+v, want 16 more at once", d)
	}
	if err := l.setRate(now, 1, time.Second, 5); err != nil {
		t.Fatal(err)
	}
	l.take(&d, now+int64(5*time.Second), "k", 5)
	if !d.Allowed {
		t.Fatalf("smaller bucket: %+v; 20 spent are capped at the new 5, which refill in 5 s", d)
	}
}

func TestOverridesChangeWhileRunning(t *testing.T) {
	l := newTestLimiter(t, WithRate(1, time.Second), WithBucketSize(2))
	now := int64(time.Hour)
	if err := l.setOverride(now, "vip", 1000, time.Second, 100); err != nil {
		t.Fatal(err)
	}
	admitted := func(key string, n int) (got int) {
		for range n {
			var d Decision
			if l.take(&d, now, key, 1); d.Allowed {
				got++
			}
		}
		return got
	}
	if got := admitted("vip", 150); got != 100 {
		t.Fatalf("vip admitted %d, want its own bucket of 100", got)
	}
	if got := admitted("other", 5); got != 2 {
		t.Fatalf("another key admitted %d, want the default 2", got)
	}
	l.removeOverride(now, "vip")
	if got := admitted("vip", 5); got != 0 {
		t.Fatalf("vip back on the default admitted %d; its 100 spent cap the default bucket", got)
	}
	// Invalid changes are refused and change nothing.
	for _, err := range []error{
		l.setRate(now, 0, time.Second, 1), l.setRate(now, 1, time.Nanosecond, 1),
		l.setOverride(now, "", 1, time.Second, 1), l.setOverride(now, "k", 1, time.Second, 0),
	} {
		if err == nil {
			t.Fatal("an invalid change was accepted")
		}
	}
	if tokens, per := l.Rate(); tokens != 1 || per != time.Second || l.BucketSize() != 2 {
		t.Fatalf("after refused changes: %d per %v, bucket %d", tokens, per, l.BucketSize())
	}
	l.RemoveOverride("never-set") // nothing to do
}
