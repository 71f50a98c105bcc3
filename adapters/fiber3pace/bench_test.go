package fiber3pace

import (
	"net"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"
	fiberlimiter "github.com/gofiber/fiber/v3/middleware/limiter"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/conformance"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"github.com/valyala/fasthttp"
)

// fiberRequest serves one GET through a Fiber app with mw, from one
// client address, and counts the requests that reached the handler.
func fiberRequest(mw fiber.Handler) (serve func(), served *int, ctx *fasthttp.RequestCtx) {
	app := fiber.New()
	if mw != nil {
		app.Use(mw)
	}
	served = new(int)
	app.Get("/", func(c fiber.Ctx) error { *served++; return c.SendStatus(fiber.StatusOK) })
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
// limiter middleware with fiber3pace sending the same three fields
// (X-RateLimit-Limit, -Remaining, -Reset: "legacy"), and shows fiber3pace's
// default (the draft fields), no fields, bare Fiber, a middleware that
// does nothing and a bare Take of the same key (docs/performance.md#middleware).
// Each includes
// Fiber's routing and the handler.
func BenchmarkFiber(b *testing.B) {
	newLimiter := conformance.BenchLimiter
	b.Run("bare", func(b *testing.B) { benchFiber(b, nil, "") })
	// Any middleware costs Fiber a second routing step (c.Next): the floor
	// of every limiter.
	b.Run("noop-middleware", func(b *testing.B) { benchFiber(b, func(c fiber.Ctx) error { return c.Next() }, "") })
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
			part("floor", func(c fiber.Ctx) error { return c.Next() }),
			conformance.TakePart(b, "192.0.2.1"),
			part("no-fields", New(newLimiter(b), WithHeaders(headers.None))),
			conformance.Part{Name: "draft-fields", Serve: draft},
			part("fields-floor", func(c fiber.Ctx) error {
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
	b.Run("fiber3pace/per-ip/legacy-fields", func(b *testing.B) {
		benchFiber(b, New(newLimiter(b), WithHeaders(headers.Legacy)), "X-RateLimit-Remaining")
	})
	b.Run("fiber3pace/per-ip/draft-fields", func(b *testing.B) {
		benchFiber(b, New(newLimiter(b)), "RateLimit")
	})
	b.Run("fiber3pace/per-ip/no-fields", func(b *testing.B) {
		benchFiber(b, New(newLimiter(b), WithHeaders(headers.None)), "")
	})
	b.Run("fiber3pace/global/no-fields", func(b *testing.B) {
		benchFiber(b, New(newLimiter(b), WithHeaders(headers.None), WithKeyFunc(GlobalKey)), "")
	})
}

// BenchmarkFiberSetters splits the draft fields' cost in Fiber v3
// (docs/performance.md#middleware-targets): the middleware's decision
// with nothing after it, with fasthttp's two setters of constant fields
// after it (or before it), and with the fields' values found after it as
// the middleware finds them. What the setters cost beside a decision
// depends on the order of functions in the binary: build with
// -ldflags=-randlayout=N to see it move.
func BenchmarkFiberSetters(b *testing.B) {
	policy, limit := []byte(conformance.BenchPolicyField), []byte(conformance.BenchLimitField)
	const (
		nothing = iota
		constantSetters
		foundValues
		settersFirst
	)
	// decided is the middleware's decision, then what, then the chain.
	// what is a switch, not a func: a Request handed to one escapes.
	decided := func(name string, what int) conformance.Part {
		g, err := adapter.Configure(conformance.BenchLimiter(b), "fiber3pace", []adapter.Option{adapter.Headers(headers.Draft)})
		if err != nil {
			b.Fatal(err)
		}
		flow, err := adapter.NewFlow(g, adapter.Hooks[fiber.Ctx]{Peer: peer, Forwarded: forwarded, KeysOutliveRequest: true})
		if err != nil {
			b.Fatal(err)
		}
		serve, _, _ := fiberRequest(func(c fiber.Ctx) error {
			var req adapter.Request
			if what == settersFirst {
				h := &c.Response().Header
				h.SetCanonical(rateLimitPolicy, policy)
				h.SetCanonical(rateLimit, limit)
			}
			if step := flow.Decide(c, &req); step != adapter.Admit {
				b.Fatalf("step %v", step)
			}
			switch what {
			case constantSetters:
				h := &c.Response().Header
				h.SetCanonical(rateLimitPolicy, policy)
				h.SetCanonical(rateLimit, limit)
			case foundValues:
				p, l, ok := g.AdmittedDraft(&req)
				if !ok {
					b.Fatal("no draft fields")
				}
				h := &c.Response().Header
				h.SetCanonical(rateLimitPolicy, unsafeBytes(p))
				h.SetCanonical(rateLimit, unsafeBytes(l))
			}
			return c.Next()
		})
		return conformance.Part{Name: name, Serve: serve}
	}
	conformance.Interleave(b,
		conformance.TakePart(b, "192.0.2.1"),
		decided("decided", nothing),
		decided("constant-setters", constantSetters),
		decided("found-values", foundValues),
		decided("setters-first", settersFirst),
	)
}
