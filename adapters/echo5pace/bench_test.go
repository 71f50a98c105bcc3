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

func benchEcho(b *testing.B, mw echo.MiddlewareFunc) {
	e := echo.New()
	if mw != nil {
		e.Use(mw)
	}
	served := 0
	e.GET("/", func(c *echo.Context) error { served++; return c.NoContent(http.StatusOK) })
	w := &discard{h: http.Header{}}
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "192.0.2.1:1234"
	b.ReportAllocs()
	loops := 0
	for b.Loop() {
		e.ServeHTTP(w, req)
		loops++
	}
	if served != loops {
		b.Fatalf("%d of %d requests reached the handler", served, loops)
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
