package fiberpace

import (
	"net"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	fiberlimiter "github.com/gofiber/fiber/v2/middleware/limiter"
	"github.com/pedreviljoen/gopherpace/core/conformance"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"github.com/valyala/fasthttp"
)

// fiberRequest serves one GET from 192.0.2.1 through a Fiber app using mw.
func fiberRequest(mw ...fiber.Handler) conformance.BenchRequest {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	for _, m := range mw {
		app.Use(m)
	}
	served := 0
	app.Get("/", func(c *fiber.Ctx) error { served++; return c.SendStatus(fiber.StatusOK) })
	h := app.Handler()
	req := new(fasthttp.Request)
	req.SetRequestURI("/")
	req.Header.SetMethod(fiber.MethodGet)
	ctx := new(fasthttp.RequestCtx)
	ctx.Init(req, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}, nil)
	return conformance.BenchRequest{
		Serve:  func() { h(ctx) },
		Served: func() int { return served },
		Header: func(name string) string { return string(ctx.Response.Header.Peek(name)) },
	}
}

// BenchmarkFiber compares, per client IP on the admit path, Fiber's own
// limiter middleware with fiberpace sending the same three fields
// (X-RateLimit-Limit, -Remaining, -Reset: "legacy"), and shows fiberpace's
// default (the draft fields), no fields, bare Fiber, a middleware that
// does nothing and a bare Take of the same key (docs/performance.md#middleware).
// Each includes
// Fiber's routing and the handler.
func BenchmarkFiber(b *testing.B) {
	conformance.BenchMiddleware(b, conformance.MiddlewareBench[fiber.Handler, Option]{
		Prefix:  "fiberpace",
		Request: fiberRequest,
		Floor:   func(c *fiber.Ctx) error { return c.Next() },
		FieldsFloor: func(policy, limit string) fiber.Handler {
			p, l := []byte(policy), []byte(limit)
			return func(c *fiber.Ctx) error {
				h := &c.Response().Header
				h.SetCanonical(rateLimitPolicy, p)
				h.SetCanonical(rateLimit, l)
				return c.Next()
			}
		},
		New:     New,
		Options: adapterOptions,
		Own: &conformance.OwnLimiter[fiber.Handler]{
			Name:  "fiber-limiter/per-ip/legacy-fields",
			Style: headers.Legacy,
			New: func() fiber.Handler {
				return fiberlimiter.New(fiberlimiter.Config{Max: 1 << 30, Expiration: time.Hour})
			},
		},
	})
}
