package httplimit

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/conformance"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// adapterOptions are this package's options in the conformance suite's terms.
var adapterOptions = conformance.Options[Option]{
	GlobalKey: func() Option { return WithKeyFunc(GlobalKey) },
	HeaderKey: func(name string) Option { return WithKeyFunc(HeaderKey(name)) },
	KeyError: func(err error) Option {
		return WithKeyFunc(func(*http.Request) (string, error) { return "", err })
	},
	TrustedProxies: WithTrustedProxies,
	IPv6Prefix:     WithIPv6Prefix,
	CostFromHeader: func(name string) Option {
		return WithCost(func(r *http.Request) int64 { return conformance.Cost(r.Header.Get(name)) })
	},
	SkipPath:   func(path string) Option { return WithSkip(func(r *http.Request) bool { return r.URL.Path == path }) },
	Refund:     WithRefund,
	PolicyName: WithPolicyName,
	Headers:    WithHeaders,
	DenyHandler: func(h conformance.Handler) Option {
		return WithDenyHandler(func(w http.ResponseWriter, r *http.Request, d gopherpace.Decision) {
			if h == conformance.Silent {
				return
			}
			w.Header().Set("X-Denied-Remaining", fmt.Sprint(d.Remaining))
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, "denied")
		})
	},
	ErrorHandler: func(h conformance.Handler) Option {
		return WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			if h != conformance.Silent {
				w.Header().Set("X-Error", conformance.ErrorName(err))
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, "failed")
			}
		})
	},
	DecisionInContext: WithDecisionInContext,
	UsageFromHeader: func(name string) Option {
		return WithUsage(func(r *http.Request, _ http.Header) int64 { return conformance.Cost(r.Header.Get(name)) })
	},
	MaxDelay:          WithMaxDelay,
	Concurrency:       WithConcurrency,
	ConcurrencyPerKey: WithConcurrencyPerKey,
	AlsoFromHeader: func(l *gopherpace.Limiter, name, policy string) Option {
		return WithAlso(l, HeaderKey(name), policy)
	},
	NilFuncs: []Option{WithKeyFunc(nil), WithCost(nil), WithSkip(nil), WithDenyHandler(nil), WithErrorHandler(nil), WithUsage(nil)},
}

// app serves the routes every conformance server has.
func app() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		conformance.Hold(r.Header.Get("X-Hold"))
		if d, ok := FromContext(r.Context()); ok {
			w.Header().Set("X-Remaining", fmt.Sprint(d.Remaining))
		}
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("GET /fail", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "failed", http.StatusInternalServerError)
	})
	mux.HandleFunc("GET /skip", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	return mux
}

func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T, l *gopherpace.Limiter, s conformance.Setup) string {
		srv := httptest.NewServer(New(l, conformance.OptionsFor(s, adapterOptions)...)(app()))
		t.Cleanup(srv.Close)
		return srv.URL
	})
}

func TestRefillsWithVirtualTime(t *testing.T) {
	conformance.RefillsWithVirtualTime(t, func(t *testing.T, l *gopherpace.Limiter) func(string) int {
		h := New(l)(app())
		return func(path string) int {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
			return w.Code
		}
	})
}

func TestErrorHandlerAndServerFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := conformance.Limiter(t, 1, 1)
		broken := errors.New("no tenant")
		var seen error
		h := New(l,
			WithKeyFunc(func(r *http.Request) (string, error) { return "", broken }),
			WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
				seen = err
				w.WriteHeader(http.StatusTeapot)
			}),
		)(app())
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		if w.Code != http.StatusTeapot || seen != broken {
			t.Fatalf("custom error handler: %d, %v", w.Code, seen)
		}
		// The default answer to an error that is not the client's is 500,
		// without the error's text; a peer that is not IP is such an error.
		h = New(l, WithKeyFunc(func(*http.Request) (string, error) { return "", broken }))(app())
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		if w.Code != 500 || strings.Contains(w.Body.String(), "tenant") {
			t.Fatalf("key error: %d %q; want 500 without the error's text", w.Code, w.Body.String())
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "@" // a Unix socket peer
		w = httptest.NewRecorder()
		New(l)(app()).ServeHTTP(w, r)
		if w.Code != 500 {
			t.Fatalf("non-IP peer: %d, want 500", w.Code)
		}
	})
}

// The status a refund sees is the final one, past informational ones,
// and the middleware keeps the writer's Flush reachable.
func TestRefundSeesTheFinalStatus(t *testing.T) {
	l := conformance.Limiter(t, 1, 1)
	h := New(l, WithKeyFunc(GlobalKey), WithRefund(adapter.RefundFailed))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusEarlyHints) // informational: not the status
		w.WriteHeader(http.StatusNotFound)
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush through the middleware: %v", err)
		}
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for i := range 3 {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		// The flushed 404 reaches the client before the handler returns:
		// the body's end comes after the middleware's refund. Closed
		// unread, the connection would not be reused, and the next
		// request could race the refund on a connection of its own.
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Fatalf("request %d: %d, want every 404 refunded and served", i, resp.StatusCode)
		}
	}
}

func TestInvalidOptions(t *testing.T) {
	conformance.CheckOptions(t, "httplimit", adapterOptions,
		func(l *gopherpace.Limiter, opts ...Option) error { _, err := Build(l, opts...); return err },
		func(l *gopherpace.Limiter, opts ...Option) { New(l, opts...) })
}

// The middleware never allocates for its key, its decision or, once the
// values were sent before, its fields.
func TestAllocations(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRefillRate(1e9), gopherpace.WithBucketSize(1e9))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct {
		style headers.Style
		want  float64
	}{{headers.None, 0}, {headers.Draft, 0}, {headers.Legacy, 0}, {headers.Both, 0}} {
		h := New(l, WithHeaders(tc.style))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		w := conformance.DiscardWriter()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "[2001:db8:1:2:3:4:5:6]:443"
		if got := testing.AllocsPerRun(200, func() { h.ServeHTTP(w, r) }); got > tc.want {
			t.Errorf("style %d: %.1f allocations per request, want at most %.0f", tc.style, got, tc.want)
		}
	}
}

// A request without the header its key comes from gets a 400 that names
// the header; errors.Is still finds ErrMissingKey.
func TestMissingKeyNamesTheHeader(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRefillRate(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := HeaderKey("x-api-key")(httptest.NewRequest("GET", "/", nil)); !errors.Is(err, ErrMissingKey) {
		t.Fatalf("HeaderKey's error %v is not ErrMissingKey", err)
	}
	// Named as the user wrote it, and found whatever the request's case.
	h := New(l, WithKeyFunc(HeaderKey("x-api-key")))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "the x-api-key header is missing") {
		t.Fatalf("%d %q", w.Code, w.Body.String())
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-KEY", "k")
	if k, err := HeaderKey("x-api-key")(r); k != "k" || err != nil {
		t.Fatalf("HeaderKey read %q, %v", k, err)
	}
}
