package echo5pace

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"
	"github.com/pedreviljoen/gopherpace/core/conformance"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

type discard struct{ h http.Header }

func (d *discard) Header() http.Header       { return d.h }
func (*discard) Write(p []byte) (int, error) { return len(p), nil }
func (*discard) WriteHeader(int)             {}

// echoRequest serves one GET through an Echo server with mw, from one
// client address, and counts the requests that reached the handler.
func echoRequest(mw echo.MiddlewareFunc) (serve func(), served *int, header http.Header) {
	e := echo.New()
	if mw != nil {
		e.Use(mw)
	}
	served = new(int)
	e.GET("/", func(c *echo.Context) error { *served++; return c.NoContent(http.StatusOK) })
	w := &discard{h: http.Header{}}
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "192.0.2.1:1234"
	return func() { e.ServeHTTP(w, req) }, served, w.h
}

func benchEcho(b *testing.B, mw echo.MiddlewareFunc) {
	serve, served, _ := echoRequest(mw)
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

// BenchmarkEcho compares, per client IP on the admit path, Echo v5's own
// RateLimiter (its memory store, x/time/rate per identifier, which in v5
// sets X-RateLimit-Limit and X-RateLimit-Remaining) with echo5pace
// sending the legacy fields (those two and X-RateLimit-Reset: one more),
// and shows echo5pace with no fields, its default (the
// draft fields), a global key, bare Echo, and a bare Take of the same key
// (docs/performance.md#middleware). Each includes Echo's routing
// and the handler.
func BenchmarkEcho(b *testing.B) {
	newLimiter := conformance.BenchLimiter
	b.Run("bare", func(b *testing.B) { benchEcho(b, nil) })
	b.Run("take-same-key", func(b *testing.B) { conformance.BenchTake(b, "192.0.2.1") })
	// The floor, a bare Take, ours with and without fields and the floor
	// storing the same fields, batch by batch in turn: the ratios
	// docs/performance.md states.
	b.Run("interleaved", func(b *testing.B) {
		part := func(name string, mw echo.MiddlewareFunc) conformance.Part {
			serve, _, _ := echoRequest(mw)
			return conformance.Part{Name: name, Serve: serve}
		}
		// fields-floor is the floor storing the two draft fields ours
		// sends, as constants: the framework's own share of draft-fields.
		policy, limit := []string{conformance.BenchPolicyField}, []string{conformance.BenchLimitField}
		draft, _, draftHeader := echoRequest(RateLimiter(newLimiter(b)))
		conformance.Interleave(b,
			part("floor", func(next echo.HandlerFunc) echo.HandlerFunc {
				return func(c *echo.Context) error { return next(c) }
			}),
			conformance.TakePart(b, "192.0.2.1"),
			part("no-fields", RateLimiter(newLimiter(b), WithHeaders(headers.None))),
			conformance.Part{Name: "draft-fields", Serve: draft},
			part("fields-floor", func(next echo.HandlerFunc) echo.HandlerFunc {
				return func(c *echo.Context) error {
					h := c.Response().Header()
					h[headers.RateLimitPolicy], h[headers.RateLimit] = policy, limit
					return next(c)
				}
			}),
		)
		conformance.CheckBenchFields(b, draftHeader.Get(headers.RateLimitPolicy), draftHeader.Get(headers.RateLimit))
	})
	// The framework's own limiter and ours like for like, in turn on
	// their own: each allocates, and its collections would land on the
	// parts above.
	b.Run("interleaved/own", func(b *testing.B) {
		part := func(name string, mw echo.MiddlewareFunc) conformance.Part {
			serve, _, _ := echoRequest(mw)
			return conformance.Part{Name: name, Serve: serve}
		}
		conformance.Interleave(b,
			part("own", middleware.RateLimiter(middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{Rate: 1e9, Burst: 1e9}))),
			part("own-ours", RateLimiter(newLimiter(b), WithHeaders(headers.Legacy))),
		)
	})
	// Echo v5 builds the middleware chain once, at the first request: a
	// middleware that does nothing costs a call, the floor of every limiter.
	b.Run("noop-middleware", func(b *testing.B) {
		benchEcho(b, func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c *echo.Context) error { return next(c) }
		})
	})
	b.Run("echo-limiter/per-ip/x-ratelimit-fields", func(b *testing.B) {
		store := middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{Rate: 1e9, Burst: 1e9})
		benchEcho(b, middleware.RateLimiter(store))
	})
	b.Run("echo5pace/per-ip/legacy-fields", func(b *testing.B) {
		benchEcho(b, RateLimiter(newLimiter(b), WithHeaders(headers.Legacy)))
	})
	b.Run("echo5pace/per-ip/no-fields", func(b *testing.B) {
		benchEcho(b, RateLimiter(newLimiter(b), WithHeaders(headers.None)))
	})
	b.Run("echo5pace/per-ip/draft-fields", func(b *testing.B) {
		benchEcho(b, RateLimiter(newLimiter(b)))
	})
	b.Run("echo5pace/global/no-fields", func(b *testing.B) {
		benchEcho(b, RateLimiter(newLimiter(b), WithHeaders(headers.None), WithKeyFunc(GlobalKey)))
	})
}
