package ginpace

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/pedreviljoen/gopherpace/core/conformance"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// discard is a reusable ResponseWriter, so both sides measure gin and the
// middleware, not a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header       { return d.h }
func (*discard) Write(p []byte) (int, error) { return len(p), nil }
func (*discard) WriteHeader(int)             {}

// ginRequest serves one GET through a Gin engine with use, from one
// client address, and counts the requests that reached the handler.
func ginRequest(use gin.HandlerFunc) (serve func(), served *int, header http.Header) {
	r := gin.New()
	if use != nil {
		r.Use(use)
	}
	served = new(int)
	r.GET("/", func(c *gin.Context) { *served++; c.Status(http.StatusOK) })
	w := &discard{h: http.Header{}}
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "192.0.2.1:1234"
	return func() { r.ServeHTTP(w, req) }, served, w.h
}

func benchEngine(b *testing.B, use gin.HandlerFunc) {
	serve, served, _ := ginRequest(use)
	b.ReportAllocs()
	loops := 0
	for b.Loop() {
		serve()
		loops++
	}
	if *served != loops {
		b.Fatalf("%d of %d requests reached the handler", *served, loops)
	}
}

// BenchmarkGin measures ginpace on the admit path: per client IP with its
// default fields (the draft RateLimit-Policy and RateLimit) and with none,
// and with a global key, beside bare Gin. Each includes Gin's routing and
// the handler; beside them, a middleware that does nothing and a bare Take
// of the same key, the floors docs/performance.md#middleware measures
// against. Gin has no limiter of its own to compare with; bench/
// compares the net/http middleware with its peers.
func BenchmarkGin(b *testing.B) {
	newLimiter := conformance.BenchLimiter
	b.Run("bare", func(b *testing.B) { benchEngine(b, nil) })
	// Any middleware costs Gin a step of its chain: the floor of every
	// limiter.
	b.Run("noop-middleware", func(b *testing.B) { benchEngine(b, func(c *gin.Context) { c.Next() }) })
	b.Run("take-same-key", func(b *testing.B) { conformance.BenchTake(b, "192.0.2.1") })
	// The floor, a bare Take and ginpace with and without fields, batch by
	// batch in turn: the ratios docs/performance.md states.
	b.Run("interleaved", func(b *testing.B) {
		part := func(name string, use gin.HandlerFunc) conformance.Part {
			serve, _, _ := ginRequest(use)
			return conformance.Part{Name: name, Serve: serve}
		}
		// fields-floor is the floor storing the two draft fields ours
		// sends, as constants: the framework's own share of draft-fields.
		policy, limit := []string{conformance.BenchPolicyField}, []string{conformance.BenchLimitField}
		draft, _, draftHeader := ginRequest(New(newLimiter(b)))
		conformance.Interleave(b,
			part("floor", func(c *gin.Context) { c.Next() }),
			conformance.TakePart(b, "192.0.2.1"),
			part("no-fields", New(newLimiter(b), WithHeaders(headers.None))),
			conformance.Part{Name: "draft-fields", Serve: draft},
			part("fields-floor", func(c *gin.Context) {
				h := c.Writer.Header()
				h[headers.RateLimitPolicy], h[headers.RateLimit] = policy, limit
				c.Next()
			}),
		)
		conformance.CheckBenchFields(b, draftHeader.Get(headers.RateLimitPolicy), draftHeader.Get(headers.RateLimit))
	})
	b.Run("ginpace/per-ip/draft-fields", func(b *testing.B) { benchEngine(b, New(newLimiter(b))) })
	b.Run("ginpace/per-ip/no-fields", func(b *testing.B) { benchEngine(b, New(newLimiter(b), WithHeaders(headers.None))) })
	b.Run("ginpace/global/no-fields", func(b *testing.B) {
		benchEngine(b, New(newLimiter(b), WithHeaders(headers.None), WithKeyFunc(GlobalKey)))
	})
}
