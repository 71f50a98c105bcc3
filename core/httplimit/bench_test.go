package httplimit

import (
	"net/http"
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/conformance"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header       { return d.h }
func (*discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (*discardWriter) WriteHeader(int)             {}

// BenchmarkMiddleware measures the admit path per client IP (the default
// key) in each field style, and with a global key, over a handler that
// does nothing; beside it, the bare handler and a bare Take of the same
// key, the floor the middleware's cost is measured against
// (docs/performance.md#middleware). bench/ compares it with peer
// libraries.
func BenchmarkMiddleware(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		served := 0
		h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ })
		w := &discardWriter{h: http.Header{}}
		r, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
		b.ReportAllocs()
		for b.Loop() {
			h.ServeHTTP(w, r)
		}
		if served != b.N {
			b.Fatalf("%d of %d requests served", served, b.N)
		}
	})
	b.Run("take-same-key", func(b *testing.B) { conformance.BenchTake(b, "192.0.2.1") })
	// The floor, a bare Take, the middleware with and without fields and
	// the floor storing the same fields, batch by batch in turn: the
	// ratios docs/performance.md states.
	b.Run("interleaved", func(b *testing.B) {
		serve := func(h http.Handler) (func(), http.Header) {
			w := &discardWriter{h: http.Header{}}
			r, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
			r.RemoteAddr = "192.0.2.1:1234"
			return func() { h.ServeHTTP(w, r) }, w.h
		}
		part := func(name string, h http.Handler) conformance.Part {
			s, _ := serve(h)
			return conformance.Part{Name: name, Serve: s}
		}
		handler := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
		// fields-floor is the floor storing the two draft fields ours
		// sends, as constants: net/http's own share of draft-fields.
		policy, limit := []string{conformance.BenchPolicyField}, []string{conformance.BenchLimitField}
		draft, draftHeader := serve(New(conformance.BenchLimiter(b))(handler))
		conformance.Interleave(b,
			part("floor", handler),
			conformance.TakePart(b, "192.0.2.1"),
			part("no-fields", New(conformance.BenchLimiter(b), WithHeaders(headers.None))(handler)),
			conformance.Part{Name: "draft-fields", Serve: draft},
			part("fields-floor", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				h := w.Header()
				h[headers.RateLimitPolicy], h[headers.RateLimit] = policy, limit
			})),
		)
		conformance.CheckBenchFields(b, draftHeader.Get(headers.RateLimitPolicy), draftHeader.Get(headers.RateLimit))
	})
	// The worst case for the fields' values: every response's remaining
	// tokens are new (a bucket that only drains), so each RateLimit value
	// is rendered and kept, where the other rows find theirs.
	draining := func(b *testing.B) *gopherpace.Limiter {
		l, err := gopherpace.New(gopherpace.WithRefillRate(1000), gopherpace.WithBucketSize(1_000_000_000))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		return l
	}
	for _, tc := range []struct {
		name    string
		opts    []Option
		limiter func(*testing.B) *gopherpace.Limiter
	}{
		{"per-ip/no-fields", []Option{WithHeaders(headers.None)}, conformance.BenchLimiter},
		{"per-ip/draft-fields", nil, conformance.BenchLimiter},
		{"per-ip/draft-fields/new-values", nil, draining},
		{"per-ip/legacy-fields", []Option{WithHeaders(headers.Legacy)}, conformance.BenchLimiter},
		{"per-ip/both", []Option{WithHeaders(headers.Both)}, conformance.BenchLimiter},
		{"global/no-fields", []Option{WithHeaders(headers.None), WithKeyFunc(GlobalKey)}, conformance.BenchLimiter},
	} {
		b.Run(tc.name, func(b *testing.B) {
			served := 0
			h := New(tc.limiter(b), tc.opts...)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
			w := &discardWriter{h: http.Header{}}
			r, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
			r.RemoteAddr = "192.0.2.1:1234"
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
			if served != b.N {
				b.Fatalf("%d of %d requests served", served, b.N)
			}
		})
	}
}
