package fiberpace

import (
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/conformance"
	"github.com/valyala/fasthttp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp's process-wide goroutine that refreshes the Date header.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// fasthttp's worker-pool cleaner notices Stop only after its
		// 10-second sleep; it exits then.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		// The process-wide clock of Fiber's own limiter, which the
		// benchmarks compare with.
		goleak.IgnoreAnyFunction("github.com/gofiber/fiber/v2/utils.StartTimeStampUpdater.func1.1"),
		// The sweeper of Fiber's own limiter's memory store, which that
		// limiter never stops.
		goleak.IgnoreAnyFunction("github.com/gofiber/fiber/v2/internal/memory.(*Storage).gc"),
	)
}

// adapterOptions are this package's options in the conformance suite's terms.
var adapterOptions = conformance.Options[Option]{
	GlobalKey: func() Option { return WithKeyFunc(GlobalKey) },
	HeaderKey: func(name string) Option { return WithKeyFunc(HeaderKey(name)) },
	KeyError: func(err error) Option {
		return WithKeyFunc(func(*fiber.Ctx) (string, error) { return "", err })
	},
	TrustedProxies: WithTrustedProxies,
	IPv6Prefix:     WithIPv6Prefix,
	CostFromHeader: func(name string) Option {
		return WithCost(func(c *fiber.Ctx) int64 { return conformance.Cost(c.Get(name)) })
	},
	SkipPath:   func(path string) Option { return WithSkip(func(c *fiber.Ctx) bool { return c.Path() == path }) },
	Refund:     WithRefund,
	PolicyName: WithPolicyName,
	Headers:    WithHeaders,
	DenyHandler: func(h conformance.Handler) Option {
		return WithDenyHandler(func(c *fiber.Ctx, d gopherpace.Decision) error {
			switch h {
			case conformance.Answering:
				c.Set("X-Denied-Remaining", fmt.Sprint(d.Remaining))
				return c.Status(fiber.StatusTooManyRequests).SendString("denied")
			case conformance.Careless: // its error dropped
				_ = c.Status(fiber.StatusTooManyRequests).SendString("denied")
			}
			return nil
		})
	},
	ErrorHandler: func(h conformance.Handler) Option {
		return WithErrorHandler(func(c *fiber.Ctx, err error) error {
			switch h {
			case conformance.Answering:
				c.Set("X-Error", conformance.ErrorName(err))
				return c.Status(fiber.StatusServiceUnavailable).SendString("failed")
			case conformance.Careless:
				_ = c.Status(fiber.StatusServiceUnavailable).SendString("failed")
			}
			return nil
		})
	},
	DecisionInContext: WithDecisionInContext,
	UsageFromHeader: func(name string) Option {
		return WithUsage(func(c *fiber.Ctx) int64 { return conformance.Cost(c.Get(name)) })
	},
	MaxDelay:          WithMaxDelay,
	Concurrency:       WithConcurrency,
	ConcurrencyPerKey: WithConcurrencyPerKey,
	AlsoFromHeader: func(l *gopherpace.Limiter, name, policy string) Option {
		return WithAlso(l, HeaderKey(name), policy)
	},
	NilFuncs: []Option{WithKeyFunc(nil), WithCost(nil), WithSkip(nil), WithDenyHandler(nil), WithErrorHandler(nil), WithUsage(nil)},
}

// newApp is a Fiber app configured as the Fiber docs suggest behind a
// proxy, trusting every peer: the adapter must not rely on it.
func newApp(h fiber.Handler) *fiber.App {
	app := fiber.New(fiber.Config{
		DisableStartupMessage: true,
		ProxyHeader:           fiber.HeaderXForwardedFor, EnableTrustedProxyCheck: true, TrustedProxies: []string{"0.0.0.0/0"},
	})
	app.Use(h)
	app.Get("/", func(c *fiber.Ctx) error {
		conformance.Hold(c.Get("X-Hold"))
		if d, ok := FromContext(c); ok {
			c.Set("X-Remaining", fmt.Sprint(d.Remaining))
		}
		return c.SendString("ok")
	})
	// A failure returned as an error: the app's ErrorHandler writes it
	// after the middleware has returned, and a refund must still see 500.
	app.Get("/fail", func(c *fiber.Ctx) error { return errors.New("failed") })
	app.Get("/skip", func(c *fiber.Ctx) error { return c.SendString("ok") })
	return app
}

func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T, l *gopherpace.Limiter, s conformance.Setup) string {
		app := newApp(New(l, conformance.OptionsFor(s, adapterOptions)...))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- app.Listener(ln) }()
		t.Cleanup(func() {
			if err := app.Shutdown(); err != nil {
				t.Error(err)
			}
			<-done
		})
		return "http://" + ln.Addr().String()
	})
}

func TestInvalidOptions(t *testing.T) {
	conformance.CheckOptions(t, "fiberpace", adapterOptions,
		func(l *gopherpace.Limiter, opts ...Option) error { _, err := Build(l, opts...); return err },
		func(l *gopherpace.Limiter, opts ...Option) { New(l, opts...) })
}

// Fiber's in-memory test connection keeps every goroutine inside the
// bubble.
func TestRefillsWithVirtualTime(t *testing.T) {
	conformance.RefillsWithVirtualTime(t, func(t *testing.T, l *gopherpace.Limiter) func(string) int {
		app := newApp(New(l))
		return func(path string) int {
			resp, err := app.Test(httptest.NewRequest("GET", path, nil), -1)
			if err != nil {
				t.Fatal(err)
			}
			return resp.StatusCode
		}
	})
}

// A peer that is not IP (a Unix socket) is a server error, as in every
// adapter (docs/adapters.md#answers), not every client in one bucket as
// 0.0.0.0, which is what fasthttp's RemoteIP makes of it.
func TestAUnixSocketPeerIsNoClientIP(t *testing.T) {
	l := conformance.Limiter(t, 1, 1)
	ctx, req := new(fasthttp.RequestCtx), new(fasthttp.Request)
	req.SetRequestURI("/")
	ctx.Init(req, &net.UnixAddr{Name: "/run/app.sock", Net: "unix"}, nil)
	newApp(New(l)).Handler()(ctx)
	if code, body := ctx.Response.StatusCode(), string(ctx.Response.Body()); code != 500 || body != adapter.ServerErrorMessage {
		t.Fatalf("Unix socket peer: %d %q, want 500 %q", code, body, adapter.ServerErrorMessage)
	}
	if d := l.Peek("0.0.0.0"); d.Remaining != 1 {
		t.Fatalf("a Unix socket peer spent from 0.0.0.0's bucket: %+v", d)
	}
}
