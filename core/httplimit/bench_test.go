package httplimit

import (
	"net/http"
	"testing"

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
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"per-ip/no-fields", []Option{WithHeaders(headers.None)}},
		{"per-ip/draft-fields", nil},
		{"per-ip/legacy-fields", []Option{WithHeaders(headers.Legacy)}},
		{"per-ip/both", []Option{WithHeaders(headers.Both)}},
		{"global/no-fields", []Option{WithHeaders(headers.None), WithKeyFunc(GlobalKey)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l := conformance.BenchLimiter(b)
			served := 0
			h := New(l, tc.opts...)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
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
