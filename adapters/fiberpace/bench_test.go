package fiberpace

import (
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	fiberlimiter "github.com/gofiber/fiber/v2/middleware/limiter"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"github.com/valyala/fasthttp"
)

func benchFiber(b *testing.B, mw fiber.Handler) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	if mw != nil {
		app.Use(mw)
	}
	served := 0
	app.Get("/", func(c *fiber.Ctx) error { served++; return c.SendStatus(fiber.StatusOK) })
	h := app.Handler()
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/")
	ctx.Request.Header.SetMethod(fiber.MethodGet)
	b.ReportAllocs()
	loops := 0
	for b.Loop() {
		h(&ctx)
		loops++
	}
	if served != loops {
		b.Fatalf("%d of %d requests reached the handler", served, loops)
	}
}

// BenchmarkFiber: bare Fiber, Fiber with fiberpace (client IP and global
// keys, headers off) and Fiber with its own limiter middleware, on the
// admit path.
func BenchmarkFiber(b *testing.B) {
	newLimiter := func() *gopherpace.Limiter {
		l, _ := gopherpace.New(gopherpace.WithRefillRate(1_000_000_000), gopherpace.WithBucketSize(1_000_000_000))
		return l
	}
	b.Run("bare", func(b *testing.B) { benchFiber(b, nil) })
	b.Run("fiberpace", func(b *testing.B) {
		l := newLimiter()
		defer l.Close()
		h, _ := New(l, Config{Headers: headers.None})
		benchFiber(b, h)
	})
	b.Run("fiberpace-global", func(b *testing.B) {
		l := newLimiter()
		defer l.Close()
		h, _ := New(l, Config{Headers: headers.None, KeyGenerator: func(*fiber.Ctx) string { return "" }})
		benchFiber(b, h)
	})
	b.Run("fiber-limiter", func(b *testing.B) {
		benchFiber(b, fiberlimiter.New(fiberlimiter.Config{Max: 1 << 30, Expiration: time.Hour}))
	})
}
