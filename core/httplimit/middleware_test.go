package httplimit

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

func newLimiter(t *testing.T, rate, burst int64) *gopherpace.Limiter {
	t.Helper()
	l, err := gopherpace.New(gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(burst))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func serve(t *testing.T, l *gopherpace.Limiter, opts ...Option) *httptest.Server {
	t.Helper()
	m, err := New(l, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	srv := httptest.NewServer(m.Wrap(ok))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestMiddlewareAllowsThenDenies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, 1, 2)
		srv := serve(t, l)
		for i, want := range []int{200, 200, 429} {
			resp := get(t, srv.URL, nil)
			if resp.StatusCode != want {
				t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
			}
			if got := resp.Header.Get("RateLimit-Policy"); got != `"default";q=2;w=2` {
				t.Fatalf("request %d: RateLimit-Policy %q", i, got)
			}
			switch i {
			case 0:
				if got := resp.Header.Get("RateLimit"); got != `"default";r=1;t=1` {
					t.Fatalf("RateLimit %q", got)
				}
			case 2:
				if got := resp.Header.Get("RateLimit"); got != `"default";r=0;t=1` {
					t.Fatalf("RateLimit %q", got)
				}
				if got := resp.Header.Get("Retry-After"); got != "1" {
					t.Fatalf("Retry-After %q", got)
				}
			}
		}
	})
}

// Time in a synctest bubble stands still while real sockets are open, so
// the refill test drives the handler directly and lets virtual time pass.
func TestMiddlewareRefillsWithVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := New(newLimiter(t, 2, 1))
		if err != nil {
			t.Fatal(err)
		}
		h := m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		code := func() int {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
			return w.Code
		}
		codes := []int{code(), code()}
		time.Sleep(499 * time.Millisecond)
		codes = append(codes, code())
		time.Sleep(time.Millisecond) // one token at 2/s after 500ms
		codes = append(codes, code())
		if codes[0] != 200 || codes[1] != 429 || codes[2] != 429 || codes[3] != 200 {
			t.Fatalf("codes %v, want 200 429 429 200", codes)
		}
	})
}

func TestClientIPKeyIgnoresSpoofFromUntrustedPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The test client connects from 127.0.0.1, which is not trusted
		// here: every spoofed X-Forwarded-For lands in the same bucket.
		srv := serve(t, newLimiter(t, 1, 2), WithKeyFunc(ClientIPKey(netip.MustParsePrefix("10.0.0.0/8"))))
		var codes []int
		for i := range 3 {
			codes = append(codes, get(t, srv.URL, map[string]string{"X-Forwarded-For": fmt.Sprintf("192.0.2.%d", i)}).StatusCode)
		}
		if codes[2] != 429 {
			t.Fatalf("codes %v: spoofed X-Forwarded-For escaped the limit", codes)
		}
	})
}

func TestClientIPKeyHonoursTrustedProxy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := serve(t, newLimiter(t, 1, 1), WithKeyFunc(ClientIPKey(netip.MustParsePrefix("127.0.0.0/8"))))
		a := get(t, srv.URL, map[string]string{"X-Forwarded-For": "192.0.2.1"}).StatusCode
		a2 := get(t, srv.URL, map[string]string{"X-Forwarded-For": "192.0.2.1"}).StatusCode
		b := get(t, srv.URL, map[string]string{"X-Forwarded-For": "192.0.2.2"}).StatusCode
		if a != 200 || a2 != 429 || b != 200 {
			t.Fatalf("a=%d a2=%d b=%d; want a trusted proxy's clients in separate buckets", a, a2, b)
		}
	})
}

func TestHeaderKeyCostSkipAndErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := serve(t, newLimiter(t, 1, 10),
			WithKeyFunc(HeaderKey("X-API-Key")),
			WithCost(func(r *http.Request) int64 {
				if r.URL.Path == "/big" {
					return 10
				}
				if r.URL.Path == "/huge" {
					return 11
				}
				return 1
			}),
			WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }),
			WithHeaders(headers.Legacy),
		)
		key := map[string]string{"X-API-Key": "k1"}
		if c := get(t, srv.URL+"/", nil).StatusCode; c != 400 {
			t.Fatalf("missing key: %d, want 400", c)
		}
		if c := get(t, srv.URL+"/huge", key).StatusCode; c != 500 {
			t.Fatalf("cost above the bucket: %d, want 500", c)
		}
		resp := get(t, srv.URL+"/big", key)
		if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != "0" || resp.Header.Get("X-RateLimit-Limit") != "10" {
			t.Fatalf("cost 10: %d %v", resp.StatusCode, resp.Header)
		}
		if resp.Header.Get("RateLimit") != "" {
			t.Fatal("draft header in legacy style")
		}
		if c := get(t, srv.URL+"/", key).StatusCode; c != 429 {
			t.Fatalf("after spending the bucket: %d, want 429", c)
		}
		h := get(t, srv.URL+"/healthz", key)
		if h.StatusCode != 200 || h.Header.Get("X-RateLimit-Limit") != "" {
			t.Fatalf("skipped request: %d %v", h.StatusCode, h.Header)
		}
		if c := get(t, srv.URL+"/", map[string]string{"X-API-Key": "k2"}).StatusCode; c != 200 {
			t.Fatalf("another key: %d, want 200", c)
		}
	})
}

func TestCustomHandlersAndContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, 1, 1)
		m, err := New(l,
			WithHeaders(headers.None),
			WithDecisionInContext(),
			WithDenyHandler(func(w http.ResponseWriter, r *http.Request, d gopherpace.Decision) {
				if w.Header().Get("Retry-After") != "1" {
					t.Errorf("Retry-After not set before the deny handler")
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			}),
			WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
				w.WriteHeader(http.StatusTeapot)
			}),
			WithKeyFunc(func(r *http.Request) (string, error) {
				if r.URL.Path == "/bad" {
					return "", errors.New("no key")
				}
				return "", nil
			}),
		)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, ok := FromContext(r.Context())
			if !ok || !d.Allowed || d.Limit != 1 {
				t.Errorf("decision in context: %+v %v", d, ok)
			}
		})))
		defer srv.Close()
		first := get(t, srv.URL, nil)
		if first.StatusCode != 200 || first.Header.Get("RateLimit") != "" {
			t.Fatalf("first: %d %v", first.StatusCode, first.Header)
		}
		if c := get(t, srv.URL, nil).StatusCode; c != 503 {
			t.Fatalf("custom deny: %d", c)
		}
		if c := get(t, srv.URL+"/bad", nil).StatusCode; c != 418 {
			t.Fatalf("custom error: %d", c)
		}
	})
}

func TestNewRejectsBadOptions(t *testing.T) {
	l := newLimiter(t, 1, 1)
	for name, opts := range map[string][]Option{
		"nil key":    {WithKeyFunc(nil)},
		"nil cost":   {WithCost(nil)},
		"nil skip":   {WithSkip(nil)},
		"nil deny":   {WithDenyHandler(nil)},
		"nil error":  {WithErrorHandler(nil)},
		"bad style":  {WithHeaders(99)},
		"bad policy": {WithPolicyName("new\nline")},
		"nil option": {nil},
		"empty name": {WithPolicyName("")},
	} {
		if _, err := New(l, opts...); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := New(nil); err == nil || !strings.Contains(err.Error(), "nil Limiter") {
		t.Errorf("nil limiter: %v", err)
	}
}
