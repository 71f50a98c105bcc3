package echopace

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"golang.org/x/time/rate"
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
	e.GET("/", func(c echo.Context) error { served++; return c.NoContent(http.StatusOK) })
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

// BenchmarkEcho: bare Echo, Echo with echopace (client IP key, headers
// off), and Echo with its own RateLimiter and memory store, on the admit
// path.
func BenchmarkEcho(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchEcho(b, nil) })
	// Echo v4 applies middleware per request, so any middleware allocates
	// its handler closure: this no-op one is the floor for every limiter.
	b.Run("noop-middleware", func(b *testing.B) {
		benchEcho(b, func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error { return next(c) }
		})
	})
	b.Run("echopace", func(b *testing.B) {
		l, _ := gopherpace.New(gopherpace.WithRefillRate(1_000_000_000), gopherpace.WithBucketSize(1_000_000_000))
		defer l.Close()
		benchEcho(b, RateLimiterWithConfig(Config{Limiter: l, Headers: headers.None}))
	})
	b.Run("echopace-global", func(b *testing.B) {
		l, _ := gopherpace.New(gopherpace.WithRefillRate(1_000_000_000), gopherpace.WithBucketSize(1_000_000_000))
		defer l.Close()
		global := func(echo.Context) (string, error) { return "", nil }
		benchEcho(b, RateLimiterWithConfig(Config{Limiter: l, Headers: headers.None, IdentifierExtractor: global}))
	})
	b.Run("echo-memory-store", func(b *testing.B) {
		store := middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{Rate: rate.Limit(1e9), Burst: 1e9})
		benchEcho(b, middleware.RateLimiter(store))
	})
}
