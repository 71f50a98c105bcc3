package render

import (
	"testing"
	"time"
)

// The draft t= shortcut agrees with NextTokenAfter for every state a bucket
// of any rate can be in.
func TestNextTokenSecondsMatchesNextTokenAfter(t *testing.T) {
	for _, rc := range []struct{ rate, burst int64 }{{1, 1}, {1, 60}, {3, 7}, {1000, 1000}, {1_000_000_000, 5}} {
		interval := (int64(time.Second) + rc.rate - 1) / rc.rate
		window := interval * rc.burst
		step := max(1, window/5000)
		for reset := int64(0); reset <= window; reset += step {
			q := Decision{Allowed: true, BucketSize: rc.burst, Remaining: (window - reset) / interval,
				ResetAfter: time.Duration(reset), Window: time.Duration(window)}
			if got, want := NextTokenSeconds(q), CeilSeconds(q.NextTokenAfter()); got != want {
				t.Fatalf("rate %d: %+v: t=%d, want %d", rc.rate, q, got, want)
			}
		}
	}
	slow := Decision{Allowed: true, BucketSize: 2, Remaining: 1, ResetAfter: 90 * time.Second, Window: 120 * time.Second}
	if got := NextTokenSeconds(slow); got != 30 {
		t.Fatalf("one token a minute, 90s to full: t=%d, want 30", got)
	}
}

// Several policies decided together: the draft fields list each, with its
// own quota; Retry-After describes the decision of them all.
func TestRenderMany(t *testing.T) {
	perIP := NewPolicy(Draft, "per-ip")
	perKey := NewPolicy(Draft, "per-key")
	qIP := Decision{Allowed: false, BucketSize: 10, Remaining: 0, RetryAfter: 100 * time.Millisecond, ResetAfter: time.Second, Window: time.Second}
	qKey := Decision{Allowed: true, BucketSize: 100, Remaining: 40, ResetAfter: 36 * time.Minute, Window: time.Hour}
	var f Fields
	f.RenderMany([]Policy{perIP, perKey}, []Decision{qIP, qKey}, qIP, time.Unix(0, 0))
	got := map[string]string{}
	for i := range f.Len() {
		got[f.Name(i)] = f.Value(i)
	}
	want := map[string]string{
		RetryAfter:      "1",
		RateLimitPolicy: `"per-ip";q=10;w=1, "per-key";q=100;w=3600`,
		RateLimit:       `"per-ip";r=0;t=1, "per-key";r=40;t=36`,
	}
	if len(got) != len(want) {
		t.Fatalf("fields %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	h := map[string][]string{}
	f.SetHeader(h)
	if h[RateLimit][0] != want[RateLimit] {
		t.Fatalf("SetHeader: %v", h)
	}
}
