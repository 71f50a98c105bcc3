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

// fiberRequest serves one GET from 192.0.2.1 through a Fiber app using mw.
func fiberRequest(mw ...fiber.Handler) conformance.BenchRequest {
	app := fiber.New()
	for _, m := range mw {
		app.Use(m)
	}
	served := 0
	app.Get("/", func(c fiber.Ctx) error { served++; return c.SendStatus(fiber.StatusOK) })
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
// limiter middleware with fiber3pace sending the same three fields
// (X-RateLimit-Limit, -Remaining, -Reset: "legacy"), and shows fiber3pace's
// default (the draft fields), no fields, bare Fiber, a middleware that
// does nothing and a bare Take of the same key (docs/performance.md#middleware).
// Each includes
// Fiber's routing and the handler.
func BenchmarkFiber(b *testing.B) {
	conformance.BenchMiddleware(b, conformance.MiddlewareBench[fiber.Handler, Option]{
		Prefix:  "fiber3pace",
		Request: fiberRequest,
		Floor:   func(c fiber.Ctx) error { return c.Next() },
		FieldsFloor: func(policy, limit string) fiber.Handler {
			p, l := []byte(policy), []byte(limit)
			return func(c fiber.Ctx) error {
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
		serve := fiberRequest(func(c fiber.Ctx) error {
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
		}).Serve
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
