package serviceclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeService answers /allow as gopherpace serve does, from a count of
// tokens per key it refills never; slow delays every answer.
type fakeService struct {
	tokens int64
	calls  atomic.Int64
	slow   time.Duration
	status int // answer this status with an error body, if set
}

func (f *fakeService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	if f.slow > 0 {
		select {
		case <-time.After(f.slow):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if f.status != 0 {
		w.WriteHeader(f.status)
		fmt.Fprintln(w, `{"error":"key is longer than 256 bytes"}`)
		return
	}
	if r.URL.Query().Get("key") == "" {
		w.WriteHeader(400)
		fmt.Fprintln(w, `{"error":"missing key"}`)
		return
	}
	if atomic.AddInt64(&f.tokens, -1) >= 0 {
		fmt.Fprintf(w, `{"allowed":true,"remaining":%d,"limit":10,"rate":10}`+"\n", atomic.LoadInt64(&f.tokens))
		return
	}
	w.WriteHeader(429)
	fmt.Fprintln(w, `{"allowed":false,"remaining":0,"limit":10,"rate":10,"retry_after_ms":300}`)
}

func TestAllowAndTheDeniedCache(t *testing.T) {
	f := &fakeService{tokens: 2}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false} {
		r := c.Allow(t.Context(), "tenant-a", 1, FailClosed)
		if r.Allowed != want || r.Err != nil || r.Cached {
			t.Fatalf("call %d: %+v, want allowed %v from the service", i, r, want)
		}
	}
	// Denied until 300 ms from now: asked again, answered locally.
	before := f.calls.Load()
	for range 100 {
		if r := c.Allow(t.Context(), "tenant-a", 1, FailOpen); r.Allowed || !r.Cached || r.RetryAfter <= 0 || r.RetryAfter > 300*time.Millisecond {
			t.Fatalf("a key denied 300 ms ago: %+v", r)
		}
	}
	if f.calls.Load() != before {
		t.Fatalf("%d calls reached the service while the key was denied", f.calls.Load()-before)
	}
	// Another key is asked for.
	if r := c.Allow(t.Context(), "tenant-b", 1, FailOpen); r.Cached || f.calls.Load() != before+1 {
		t.Fatalf("another key: %+v, %d calls", r, f.calls.Load()-before)
	}
	// Without the cache every call is a round trip.
	c, _ = New(srv.URL, WithDeniedCache(0))
	before = f.calls.Load()
	c.Allow(t.Context(), "tenant-a", 1, FailClosed)
	c.Allow(t.Context(), "tenant-a", 1, FailClosed)
	if f.calls.Load() != before+2 {
		t.Fatal("WithDeniedCache(0) still answered from a cache")
	}
}

// When the service does not answer, in time or at all, or answers an
// error, the call's FailMode decides and Err says why.
func TestFailModes(t *testing.T) {
	slow := httptest.NewServer(&fakeService{tokens: 100, slow: time.Second})
	defer slow.Close()
	bad := httptest.NewServer(&fakeService{status: 400})
	defer bad.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		name, url string
		want      string
	}{{"slow", slow.URL, "deadline"}, {"refused", refused, "refused"}, {"a bad request", bad.URL, "answered 400"}} {
		c, err := New(tc.url, WithTimeout(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []FailMode{FailOpen, FailClosed} {
			start := time.Now()
			r := c.Allow(t.Context(), "k", 1, mode)
			if r.Allowed != (mode == FailOpen) || r.Err == nil || !strings.Contains(r.Err.Error(), tc.want) {
				t.Errorf("%s, mode %d: %+v, want allowed %v and an error saying %q", tc.name, mode, r, mode == FailOpen, tc.want)
			}
			if took := time.Since(start); tc.name == "slow" && took > 900*time.Millisecond {
				t.Errorf("a slow service held the call %v past its 50 ms timeout", took)
			}
		}
	}
	c, _ := New(slow.URL)
	if r := c.Allow(t.Context(), "k", 1, 0); r.Allowed || r.Err == nil {
		t.Fatalf("no FailMode: %+v, want a refusal saying so", r)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if r := c.Allow(ctx, "k", 1, FailClosed); r.Allowed || !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("a cancelled context: %+v", r)
	}
}

func TestNewChecksItsArguments(t *testing.T) {
	for _, u := range []string{"", "localhost:8100", "ftp://x", "http://"} {
		if _, err := New(u); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
	for name, o := range map[string]Option{"timeout": WithTimeout(0), "client": WithHTTPClient(nil), "cache": WithDeniedCache(-1), "nil": nil} {
		if _, err := New("http://localhost:8100", o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The cache holds at most its size: past it, a key is asked for again.
func TestTheDeniedCacheIsBounded(t *testing.T) {
	c := newDeniedCache(3)
	now := time.Now()
	for i := range 5 {
		c.deny(fmt.Sprint("k", i), now.Add(time.Hour))
	}
	if len(c.byKey) != 3 {
		t.Fatalf("%d keys held, want 3", len(c.byKey))
	}
	if _, ok := c.until("k4", now); ok {
		t.Fatal("a key past the cap was remembered")
	}
}
