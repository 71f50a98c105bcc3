package headers_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

var t0 = time.Unix(1_700_000_000, 0)

func newLimiter(t *testing.T, rate, bucketSize int64) *gopherpace.Limiter {
	t.Helper()
	l, err := gopherpace.New(gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(bucketSize))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustRenderer(t *testing.T, style headers.Style, policy string) headers.Renderer {
	t.Helper()
	r, err := headers.New(style, policy)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 1}, {-time.Second, 1}, {time.Nanosecond, 1}, {time.Second, 1},
		{time.Second + time.Nanosecond, 2}, {1500 * time.Millisecond, 2}, {59 * time.Second, 59},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			if got := headers.RetryAfterSeconds(tc.d); got != tc.want {
				t.Errorf("RetryAfterSeconds(%v) = %d, want %d", tc.d, got, tc.want)
			}
		})
	}
}

func TestValues(t *testing.T) {
	l := newLimiter(t, 10, 20)
	d, _ := l.TakeAt(t0, "", 5)
	h := http.Header{}
	mustRenderer(t, headers.Both, `per "ip"`).Set(h, d, t0)
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
	headers.Renderer{}.Set(h, d, t0)
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
	mustRenderer(t, headers.None, "").Set(h, d, t0)
	if len(h) != 1 || h.Get("Retry-After") != "1" {
		t.Errorf("None on a denial: %v, want only Retry-After", h)
	}
}

// Values sent before are found, not rendered: the second response with
// the same values allocates nothing.
func TestAppendFindsValuesSentBefore(t *testing.T) {
	l := newLimiter(t, 10, 20)
	d, _ := l.TakeAt(t0, "", 5)
	r := mustRenderer(t, headers.Both, "p")
	var buf [headers.MaxFields]headers.Field
	allocs := testing.AllocsPerRun(100, func() { r.Append(buf[:0], d, t0) })
	if allocs != 0 {
		t.Fatalf("Append allocated %.0f times, want 0", allocs)
	}
	if got := r.Append(buf[:0], d, t0); len(got) != 5 {
		t.Fatalf("%d fields, want 5: %v", len(got), got)
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		style  headers.Style
		policy string
	}{
		"unknown style":   {headers.None + 1, "p"},
		"control char":    {headers.Draft, "a\nb"},
		"65 bytes":        {headers.Draft, string(make([]byte, 65))},
		"non-ASCII bytes": {headers.Draft, "naïve"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := headers.New(tc.style, tc.policy); err == nil {
				t.Fatal("no error")
			}
		})
	}
	if err := headers.CheckPolicyName(""); err == nil {
		t.Fatal("empty policy name accepted")
	}
}

func TestNextTokenAfter(t *testing.T) {
	l := newLimiter(t, 4, 4)
	d, _ := l.TakeAt(t0, "", 1)
	if got := d.NextTokenAfter(); got != 250*time.Millisecond {
		t.Fatalf("after one token: next in %v, want 250ms", got)
	}
	d, _ = l.TakeAt(t0.Add(100*time.Millisecond), "", 1)
	// Two spent, 100ms refilled: the next token arrives 150ms later.
	if got := d.NextTokenAfter(); got != 150*time.Millisecond {
		t.Fatalf("next in %v, want 150ms", got)
	}
	if got := (gopherpace.Decision{Allowed: true, BucketSize: 4, Remaining: 4}).NextTokenAfter(); got != 0 {
		t.Fatalf("full bucket: next in %v, want 0", got)
	}
}

func TestWriteTooManyRequests(t *testing.T) {
	l := newLimiter(t, 1, 1)
	l.TakeAt(t0, "", 1)
	d, _ := l.TakeAt(t0, "", 1)
	w := httptest.NewRecorder()
	headers.WriteTooManyRequests(w, d, mustRenderer(t, headers.Legacy, ""), t0)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" || w.Header().Get("X-Ratelimit-Remaining") != "0" {
		t.Fatalf("%d %v", w.Code, w.Header())
	}
}

func TestWrap(t *testing.T) {
	l := newLimiter(t, 1, 2)
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

// The RateLimit field's t= is NextTokenAfter rounded up to seconds, for
// every decision a limiter makes, at rates above and below one token a
// second.
func TestLimitFieldReportsNextToken(t *testing.T) {
	r := mustRenderer(t, headers.Draft, "p")
	for _, rc := range []struct{ rate, bucketSize int64 }{{1, 1}, {1, 60}, {3, 7}, {1000, 1000}, {1_000_000_000, 5}} {
		l := newLimiter(t, rc.rate, rc.bucketSize)
		now := t0
		for i := range 2000 {
			now = now.Add(time.Duration(i%13) * 37 * time.Millisecond)
			d, _ := l.TakeAt(now, "", 1+int64(i)%rc.bucketSize)
			var buf [headers.MaxFields]headers.Field
			got := ""
			for _, f := range r.Append(buf[:0], d, now) {
				if f.Name == headers.RateLimit {
					got = f.Value
				}
			}
			want := fmt.Sprintf(`"p";r=%d`, d.Remaining)
			if s := (d.NextTokenAfter() + time.Second - 1) / time.Second; s > 0 {
				want += fmt.Sprintf(";t=%d", s)
			}
			if got != want {
				t.Fatalf("rate %d: %+v: RateLimit %q, want %q", rc.rate, d, got, want)
			}
		}
	}
}
