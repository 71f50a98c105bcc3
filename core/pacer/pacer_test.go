package pacer_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/httplimit"
	"github.com/pedreviljoen/gopherpace/core/pacer"
)

// served sends requests straight to h, so that a synctest bubble's
// virtual clock times the waits; it counts what reaches h's middleware,
// and the 429s.
type served struct {
	h             http.Handler
	sent, refused atomic.Int64
}

func (s *served) RoundTrip(req *http.Request) (*http.Response, error) {
	s.sent.Add(1)
	in := req.Clone(req.Context()) // as a server gets it: a body, even empty
	if in.Body == nil {
		in.Body = http.NoBody
	}
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, in)
	if w.Code == http.StatusTooManyRequests {
		s.refused.Add(1)
	}
	return w.Result(), nil
}

// A service behind our own middleware at 1 a second, with a bucket of 1.
func limited(t *testing.T, opts ...httplimit.Option) *served {
	l, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	opts = append([]httplimit.Option{httplimit.WithKeyFunc(httplimit.GlobalKey)}, opts...)
	return &served{h: httplimit.New(l, opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "done")
	}))}
}

func get(t *testing.T, c *http.Client, method string) *http.Response {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("payload")
	}
	req, err := http.NewRequest(method, "http://api.example/", body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// Sequential GETs at three times the limit: the caller sees no 429. The
// first 429 is waited out and sent again; after it the host is paused, so
// later requests wait before they are sent, and are admitted first time.
func TestA429BecomesAWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, style := range []httplimit.Option{httplimit.WithHeaders(httplimit.DraftHeaders), httplimit.WithHeaders(httplimit.LegacyHeaders)} {
			svc := limited(t, style)
			c := &http.Client{Transport: &pacer.Transport{Base: svc}}
			start := time.Now()
			for i := range 6 {
				if resp := get(t, c, http.MethodGet); resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: %d", i, resp.StatusCode)
				}
			}
			if took := time.Since(start); took < 5*time.Second {
				t.Fatalf("6 requests at 1 a second took %v", took)
			}
			if svc.refused.Load() > 1 {
				t.Fatalf("the server refused %d requests; after the first the pacer should hold them", svc.refused.Load())
			}
		}
	})
}

// A POST is not sent again unless asked: its 429 comes back. Asked, and
// its body readable again, it is.
func TestNonIdempotentRequestsAreNotRepeated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := limited(t)
		fresh := func(retry bool) *http.Client { // no pause remembered
			return &http.Client{Transport: &pacer.Transport{Base: svc, RetryNonIdempotent: retry}}
		}
		get(t, fresh(false), http.MethodPost)
		if resp := get(t, fresh(false), http.MethodPost); resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("a POST refused: %d, want its 429 back", resp.StatusCode)
		}
		if resp := get(t, fresh(true), http.MethodPost); resp.StatusCode != http.StatusOK || svc.refused.Load() != 2 {
			t.Fatalf("a POST with RetryNonIdempotent: %d after %d refusals, want 200 after the second", resp.StatusCode, svc.refused.Load())
		}
	})
}

// Waits are bounded: a server that asks for longer than MaxWait gets its
// 429 returned, and a waiting request ends with its context.
func TestWaitsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := limited(t)
		c := &http.Client{Transport: &pacer.Transport{Base: svc, MaxWait: 500 * time.Millisecond}}
		get(t, c, http.MethodGet)
		start := time.Now()
		// It waits out its MaxWait of the 1 s pause, then takes the 429,
		// which asks for more than MaxWait: returned.
		if resp := get(t, c, http.MethodGet); resp.StatusCode != http.StatusTooManyRequests || time.Since(start) != 500*time.Millisecond {
			t.Fatalf("Retry-After 1 s with a MaxWait of 500 ms: %d after %v, want the 429 after 500ms", resp.StatusCode, time.Since(start))
		}
		c = &http.Client{Transport: &pacer.Transport{Base: svc}}
		get(t, c, http.MethodGet) // a 429, waited out: the host is paused a second
		get(t, c, http.MethodGet)
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/", nil)
		start = time.Now()
		if _, err := c.Do(req); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 200*time.Millisecond {
			t.Fatalf("a request whose context ends while it waits: %v after %v", err, time.Since(start))
		}
	})
}

// answering is a server that answers each request with the next of its
// answers, and counts the requests.
type answering struct {
	answers []func(http.Header) int
	n       int
}

func (a *answering) RoundTrip(req *http.Request) (*http.Response, error) {
	h := http.Header{}
	code := a.answers[min(a.n, len(a.answers)-1)](h)
	a.n++
	return &http.Response{StatusCode: code, Header: h, Body: http.NoBody, Request: req}, nil
}

// The ways a server says when to come back: Retry-After in seconds or as
// a date, on a 429 or a 503; a 429 that says nothing is returned as it is.
func TestTheServersWordsForAWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			first  func(http.Header) int
			waited time.Duration
			sent   int
		}{
			{"429, seconds", func(h http.Header) int { h.Set("Retry-After", "2"); return 429 }, 2 * time.Second, 2},
			{"503, a date", func(h http.Header) int {
				h.Set("Retry-After", time.Now().Add(3*time.Second).UTC().Format(http.TimeFormat))
				return 503
			}, 3 * time.Second, 2},
			{"429, the draft field", func(h http.Header) int { h.Set("RateLimit", `"a";r=5;t=9, "b";r=0;t=4`); return 429 }, 4 * time.Second, 2},
			{"429 saying nothing", func(http.Header) int { return 429 }, 0, 1},
			{"503 saying nothing", func(http.Header) int { return 503 }, 0, 1},
		} {
			srv := &answering{answers: []func(http.Header) int{tc.first, func(http.Header) int { return 200 }}}
			c := &http.Client{Transport: &pacer.Transport{Base: srv}}
			start := time.Now()
			get(t, c, http.MethodGet)
			if took := time.Since(start); took.Round(time.Second) != tc.waited || srv.n != tc.sent {
				t.Errorf("%s: waited %v and sent %d, want %v and %d", tc.name, took, srv.n, tc.waited, tc.sent)
			}
		}
	})
}
