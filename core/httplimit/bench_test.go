package httplimit

import (
	"net/http"
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/conformance"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

type middleware = func(http.Handler) http.Handler

// request serves one GET from 192.0.2.1 through mw to a handler that
// counts it.
func request(mw ...middleware) conformance.BenchRequest {
	served := 0
	var h http.Handler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ })
	for _, m := range mw {
		h = m(h)
	}
	return conformance.HandlerRequest(h, &served)
}

// BenchmarkMiddleware measures the admit path per client IP (the default
// key) in each field style, and with a global key, over a handler that
// only counts; beside it, the bare handler and a bare Take of the same
// key, the floor the middleware's cost is measured against
// (docs/performance.md#middleware). bench/ compares it with peer
// libraries.
func BenchmarkMiddleware(b *testing.B) {
	conformance.BenchMiddleware(b, conformance.MiddlewareBench[middleware, Option]{
		Request: request,
		Floor:   func(h http.Handler) http.Handler { return h },
		FieldsFloor: func(policy, limit string) middleware {
			p, l := []string{policy}, []string{limit}
			return func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					h := w.Header()
					h[headers.RateLimitPolicy], h[headers.RateLimit] = p, l
					next.ServeHTTP(w, r)
				})
			}
		},
		New:     New,
		Options: adapterOptions,
	})
	b.Run("per-ip/legacy-fields", func(b *testing.B) {
		conformance.BenchRow(b, request(New(conformance.BenchLimiter(b), WithHeaders(headers.Legacy))), headers.Legacy)
	})
	b.Run("per-ip/both", func(b *testing.B) {
		conformance.BenchRow(b, request(New(conformance.BenchLimiter(b), WithHeaders(headers.Both))), headers.Both)
	})
	// The worst case for the fields' values: every response's remaining
	// tokens are new (a bucket that only drains), so each RateLimit value
	// is rendered and kept, where the other rows find theirs.
	b.Run("per-ip/draft-fields/new-values", func(b *testing.B) {
		l, err := gopherpace.New(gopherpace.WithRefillRate(1000), gopherpace.WithBucketSize(1_000_000_000))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		conformance.BenchRow(b, request(New(l)), headers.Draft)
	})
}
