package echo5pace

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"
	"github.com/pedreviljoen/gopherpace/core/conformance"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// echoRequest serves one GET from 192.0.2.1 through an Echo server using
// mw.
func echoRequest(mw ...echo.MiddlewareFunc) conformance.BenchRequest {
	e := echo.New()
	e.Use(mw...)
	served := 0
	e.GET("/", func(c *echo.Context) error { served++; return c.NoContent(http.StatusOK) })
	return conformance.HandlerRequest(e, &served)
}

// BenchmarkEcho compares, per client IP on the admit path, Echo v5's own
// RateLimiter (its memory store, x/time/rate per identifier, which in v5
// sets X-RateLimit-Limit and X-RateLimit-Remaining) with echo5pace
// sending the legacy fields (those two and X-RateLimit-Reset: one more),
// and shows echo5pace with no fields, its default (the
// draft fields), a global key, bare Echo, and a bare Take of the same key
// (docs/performance.md#middleware). Each includes Echo's routing
// and the handler. Echo v5 builds the chain once, at the first request:
// a middleware that does nothing costs a call.
func BenchmarkEcho(b *testing.B) {
	conformance.BenchMiddleware(b, conformance.MiddlewareBench[echo.MiddlewareFunc, Option]{
		Prefix:  "echo5pace",
		Request: echoRequest,
		Floor: func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c *echo.Context) error { return next(c) }
		},
		FieldsFloor: func(policy, limit string) echo.MiddlewareFunc {
			p, l := []string{policy}, []string{limit}
			return func(next echo.HandlerFunc) echo.HandlerFunc {
				return func(c *echo.Context) error {
					h := c.Response().Header()
					h[headers.RateLimitPolicy], h[headers.RateLimit] = p, l
					return next(c)
				}
			}
		},
		New:     RateLimiter,
		Options: adapterOptions,
		Own: &conformance.OwnLimiter[echo.MiddlewareFunc]{
			Name:  "echo-limiter/per-ip/x-ratelimit-fields",
			Style: headers.Legacy,
			New: func() echo.MiddlewareFunc {
				return middleware.RateLimiter(middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{Rate: 1e9, Burst: 1e9}))
			},
		},
	})
}
