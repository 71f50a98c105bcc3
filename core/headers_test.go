package gopherpace

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestRetryAfterSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 1}, {-time.Second, 1}, {time.Nanosecond, 1}, {time.Second, 1},
		{time.Second + time.Nanosecond, 2}, {1500 * time.Millisecond, 2}, {59 * time.Second, 59},
	} {
		if got := RetryAfterSeconds(tc.d); got != tc.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestHeaderValues(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(10), WithBucketSize(20))
	d, _ := l.TakeAt(t0, "", 5)
	h := http.Header{}
	Headers{Style: HeadersBoth, Policy: `per "ip"`}.SetAt(h, d, t0)
	want := map[string]string{
		"Ratelimit-Policy":      `"per \"ip\"";q=20;w=2`,
		"Ratelimit":             `"per \"ip\"";r=15;t=1`,
		"X-Ratelimit-Limit":     "20",
		"X-Ratelimit-Remaining": "15",
		"X-Ratelimit-Reset":     "1700000001", // 500ms to full, rounded up
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if h.Get("Retry-After") != "" {
		t.Error("Retry-After on an allowed decision")
	}

	l.TakeAt(t0, "", 15)
	d, _ = l.TakeAt(t0, "", 3)
	h = http.Header{}
	Headers{}.SetAt(h, d, t0)
	if got := h.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1 (300ms rounded up)", got)
	}
	if got := h.Get("Ratelimit"); got != `"default";r=0;t=1` {
		t.Errorf("RateLimit = %q", got)
	}
	if h.Get("X-Ratelimit-Limit") != "" {
		t.Error("legacy headers in draft style")
	}
	h = http.Header{}
	Headers{Style: HeadersNone}.SetAt(h, d, t0)
	if len(h) != 1 || h.Get("Retry-After") != "1" {
		t.Errorf("HeadersNone on a denial: %v, want only Retry-After", h)
	}
}

func TestNextTokenAfter(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(4), WithBucketSize(4))
	d, _ := l.TakeAt(t0, "", 1)
	if got := d.NextTokenAfter(); got != 250*time.Millisecond {
		t.Fatalf("after one token: next in %v, want 250ms", got)
	}
	d, _ = l.TakeAt(t0.Add(100*time.Millisecond), "", 1)
	// Two spent, 100ms refilled: the next token arrives 150ms later.
	if got := d.NextTokenAfter(); got != 150*time.Millisecond {
		t.Fatalf("next in %v, want 150ms", got)
	}
	if got := (Decision{Allowed: true, Limit: 4, Remaining: 4}).NextTokenAfter(); got != 0 {
		t.Fatalf("full bucket: next in %v, want 0", got)
	}
}

func TestWrap(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(1), WithBucketSize(2))
	h := l.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	srv := httptest.NewServer(h)
	defer srv.Close()
	codes := []int{}
	var last *http.Response
	for range 3 {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		last = resp
	}
	if codes[0] != http.StatusTeapot || codes[1] != http.StatusTeapot || codes[2] != http.StatusTooManyRequests {
		t.Fatalf("codes %v, want 418 418 429", codes)
	}
	if got := last.Header.Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After %q, want 1", got)
	}
	if got := last.Header.Get("RateLimit-Policy"); got != `"default";q=2;w=2` {
		t.Fatalf("RateLimit-Policy %q", got)
	}
}

// The draft t= shortcut agrees with NextTokenAfter for every decision a
// limiter makes, at rates above and below one token a second.
func TestNextTokenSecondsMatchesNextTokenAfter(t *testing.T) {
	for _, rc := range []struct{ rate, burst int64 }{{1, 1}, {1, 60}, {3, 7}, {1000, 1000}, {1_000_000_000, 5}} {
		l := newTestLimiter(t, WithRefillRate(rc.rate), WithBucketSize(rc.burst))
		now := t0
		for i := range 2000 {
			now = now.Add(time.Duration(i%13) * 37 * time.Millisecond)
			d, _ := l.TakeAt(now, "", 1+int64(i)%rc.burst)
			if got, want := nextTokenSeconds(d), ceilSeconds(d.NextTokenAfter()); got != want {
				t.Fatalf("rate %d: %+v: t=%d, want %d", rc.rate, d, got, want)
			}
		}
	}
	slow := Decision{Allowed: true, Limit: 2, Remaining: 1, ResetAfter: 90 * time.Second, Window: 120 * time.Second}
	if got := nextTokenSeconds(slow); got != 30 {
		t.Fatalf("one token a minute, 90s to full: t=%d, want 30", got)
	}
}
