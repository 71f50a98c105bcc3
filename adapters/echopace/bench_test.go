package echopace

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/pedreviljoen/gopherpace/core/conformance"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"golang.org/x/time/rate"
)

// echoRequest serves one GET from 192.0.2.1 through an Echo server using
// mw.
func echoRequest(mw ...echo.MiddlewareFunc) conformance.BenchRequest {
	e := echo.New()
	e.Use(mw...)
	served := 0
	e.GET("/", func(c echo.Context) error { served++; return c.NoContent(http.StatusOK) })
	return conformance.HandlerRequest(e, &served)
}

// BenchmarkEcho compares, per client IP on the admit path, Echo's own
// RateLimiter (its memory store, x/time/rate per identifier, no fields)
// with echopace sending no fields, and shows echopace's default (the
// draft fields), a global key, bare Echo, and a bare Take of the same key
// (docs/performance.md#middleware). Each includes Echo's routing
// and the handler. Echo v4 applies middleware per request, so any
// middleware, the one doing nothing too, allocates its handler closure.
func BenchmarkEcho(b *testing.B) {
	conformance.BenchMiddleware(b, conformance.MiddlewareBench[echo.MiddlewareFunc, Option]{
		Prefix:  "echopace",
		Request: echoRequest,
		Floor: func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error { return next(c) }
		},
		FieldsFloor: func(policy, limit string) echo.MiddlewareFunc {
			p, l := []string{policy}, []string{limit}
			return func(next echo.HandlerFunc) echo.HandlerFunc {
				return func(c echo.Context) error {
					h := c.Response().Header()
					h[headers.RateLimitPolicy], h[headers.RateLimit] = p, l
					return next(c)
				}
			}
		},
		New:     RateLimiter,
		Options: adapterOptions,
		Own: &conformance.OwnLimiter[echo.MiddlewareFunc]{
			Name:  "echo-limiter/per-ip/no-fields",
			Style: headers.None,
			New: func() echo.MiddlewareFunc {
				return middleware.RateLimiter(middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{Rate: rate.Limit(1e9), Burst: 1e9}))
			},
		},
	})
}
