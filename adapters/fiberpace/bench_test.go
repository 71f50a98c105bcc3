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

// fiberRequest serves one GET through a Fiber app with mw, from one
// client address, and counts the requests that reached the handler.
func fiberRequest(mw fiber.Handler) (serve func(), served *int, ctx *fasthttp.RequestCtx) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	if mw != nil {
		app.Use(mw)
	}
	served = new(int)
	app.Get("/", func(c *fiber.Ctx) error { *served++; return c.SendStatus(fiber.StatusOK) })
	h := app.Handler()
	req := new(fasthttp.Request)
	req.SetRequestURI("/")
	req.Header.SetMethod(fiber.MethodGet)
	ctx = new(fasthttp.RequestCtx)
	ctx.Init(req, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}, nil)
	return func() { h(ctx) }, served, ctx
}

// benchFiber serves one GET through app and mw, from one client address,
// on the admit path, and checks every request reached the handler and
// carried the fields wanted.
func benchFiber(b *testing.B, mw fiber.Handler, field string) {
	serve, served, ctx := fiberRequest(mw)
	b.ReportAllocs()
	loops := 0
	for b.Loop() {
		serve()
		loops++
	}
	if *served != loops {
		b.Fatalf("%d of %d requests reached the handler", *served, loops)
	}
	if field != "" && len(ctx.Response.Header.Peek(field)) == 0 {
		b.Fatalf("response lacks %s", field)
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
	newLimiter := conformance.BenchLimiter
	b.Run("bare", func(b *testing.B) { benchFiber(b, nil, "") })
	// Any middleware costs Fiber a second routing step (c.Next): the floor
	// of every limiter.
	b.Run("noop-middleware", func(b *testing.B) { benchFiber(b, func(c *fiber.Ctx) error { return c.Next() }, "") })
	b.Run("take-same-key", func(b *testing.B) { conformance.BenchTake(b, "192.0.2.1") })
	// The floor, a bare Take, ours with and without fields and the floor
	// storing the same fields, batch by batch in turn: the ratios
	// docs/performance.md states.
	b.Run("interleaved", func(b *testing.B) {
		part := func(name string, mw fiber.Handler) conformance.Part {
			serve, _, _ := fiberRequest(mw)
			return conformance.Part{Name: name, Serve: serve}
		}
		// fields-floor is the floor storing the two draft fields ours
		// sends, as constants: fasthttp's own share of draft-fields.
		policy, limit := []byte(conformance.BenchPolicyField), []byte(conformance.BenchLimitField)
		draft, _, ctx := fiberRequest(New(newLimiter(b)))
		conformance.Interleave(b,
			part("floor", func(c *fiber.Ctx) error { return c.Next() }),
			conformance.TakePart(b, "192.0.2.1"),
			part("no-fields", New(newLimiter(b), WithHeaders(headers.None))),
			conformance.Part{Name: "draft-fields", Serve: draft},
			part("fields-floor", func(c *fiber.Ctx) error {
				h := &c.Response().Header
				h.SetCanonical(rateLimitPolicy, policy)
				h.SetCanonical(rateLimit, limit)
				return c.Next()
			}),
		)
		h := &ctx.Response.Header
		conformance.CheckBenchFields(b, string(h.Peek(headers.RateLimitPolicy)), string(h.Peek(headers.RateLimit)))
	})
	// The framework's own limiter and ours like for like, in turn on
	// their own: each allocates, and its collections would land on the
	// parts above.
	b.Run("interleaved/own", func(b *testing.B) {
		part := func(name string, mw fiber.Handler) conformance.Part {
			serve, _, _ := fiberRequest(mw)
			return conformance.Part{Name: name, Serve: serve}
		}
		conformance.Interleave(b,
			part("own", fiberlimiter.New(fiberlimiter.Config{Max: 1 << 30, Expiration: time.Hour})),
			part("own-ours", New(newLimiter(b), WithHeaders(headers.Legacy))),
		)
	})
	b.Run("fiber-limiter/per-ip/legacy-fields", func(b *testing.B) {
		benchFiber(b, fiberlimiter.New(fiberlimiter.Config{Max: 1 << 30, Expiration: time.Hour}), "X-RateLimit-Remaining")
	})
	b.Run("fiberpace/per-ip/legacy-fields", func(b *testing.B) {
		benchFiber(b, New(newLimiter(b), WithHeaders(headers.Legacy)), "X-RateLimit-Remaining")
	})
	b.Run("fiberpace/per-ip/draft-fields", func(b *testing.B) {
		benchFiber(b, New(newLimiter(b)), "RateLimit")
	})
	b.Run("fiberpace/per-ip/no-fields", func(b *testing.B) {
		benchFiber(b, New(newLimiter(b), WithHeaders(headers.None)), "")
	})
	b.Run("fiberpace/global/no-fields", func(b *testing.B) {
		benchFiber(b, New(newLimiter(b), WithHeaders(headers.None), WithKeyFunc(GlobalKey)), "")
	})
}
