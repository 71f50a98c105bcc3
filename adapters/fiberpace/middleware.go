package fiberpace

import (
	"errors"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/clientip"
)

// ContextKey is the c.Locals key of the Decision (WithDecisionInContext).
const ContextKey = "gopherpace.decision"

// New returns Fiber middleware that limits requests with l, for inline use
// as Fiber's own limiter:
//
//	app.Use(fiberpace.New(limiter))
//
// It panics on a nil Limiter or an invalid option, as a misconfigured
// server should not start; Build returns the error instead.
func New(l *gopherpace.Limiter, opts ...Option) fiber.Handler {
	h, err := Build(l, opts...)
	if err != nil {
		panic(err)
	}
	return h
}

// Build is New, returning an error naming every invalid option instead of
// panicking.
func Build(l *gopherpace.Limiter, opts ...Option) (fiber.Handler, error) {
	var cfg config
	for _, o := range opts {
		if o == nil {
			cfg.require(false, "nil Option")
			continue
		}
		o(&cfg)
	}
	g, err := adapter.Configure(l, "fiberpace", cfg.shared, cfg.problems...)
	if err != nil {
		return nil, err
	}
	return func(c *fiber.Ctx) error { return serve(g, &cfg, c) }, nil
}

func serve(g *adapter.Gate, cfg *config, c *fiber.Ctx) error {
	if cfg.skip != nil && cfg.skip(c) {
		return c.Next()
	}
	var req adapter.Request
	if cfg.key != nil {
		var err error
		if req.Keys[0], err = cfg.key(c); err != nil {
			return fail(cfg, c, err)
		}
	} else {
		peer, ok := netip.AddrFromSlice(c.Context().RemoteIP())
		if !ok {
			return fail(cfg, c, clientip.ErrNoClientIP)
		}
		var buf [64]byte
		req.Keys[0] = string(g.ClientKeyAddr(buf[:0], peer, func() ([]string, string) { return forwarded(c) }))
	}
	for i, also := range cfg.also {
		req.Keys[i+1] = req.Keys[0]
		if also != nil {
			k, err := also(c)
			if err != nil {
				return fail(cfg, c, err)
			}
			req.Keys[i+1] = k
		}
	}
	if g.Refunds() {
		// The keys are used again after the handler; fasthttp may have
		// reused the bytes behind a key read from the request by then.
		for i := range g.Limits() {
			req.Keys[i] = strings.Clone(req.Keys[i])
		}
	}
	req.Cost = 1
	if cfg.cost != nil {
		req.Cost = cfg.cost(c)
	}
	if err := g.Decide(&req); err != nil {
		return fail(cfg, c, err)
	}
	d := req.Decision()
	if g.HasFields(d) {
		var f adapter.Fields
		g.RenderRequest(&f, &req)
		h := &c.Response().Header
		for i := range f.Len() {
			// The names are canonical already; fasthttp copies both.
			h.SetCanonical(utils.UnsafeBytes(f.Name(i)), utils.UnsafeBytes(f.Value(i)))
		}
	}
	if g.DecisionInContext() {
		c.Locals(ContextKey, d)
	}
	if !d.Allowed {
		if cfg.deny != nil {
			return cfg.deny(c, d)
		}
		return c.SendStatus(fiber.StatusTooManyRequests)
	}
	err := c.Next()
	if g.Refunds() {
		g.Settle(&req, status(c, err))
	}
	return err
}

// forwarded reads every X-Forwarded-For field, in order, and X-Real-IP.
func forwarded(c *fiber.Ctx) (xff []string, realIP string) {
	for _, v := range c.Request().Header.PeekAll(fiber.HeaderXForwardedFor) {
		xff = append(xff, string(v))
	}
	return xff, c.Get("X-Real-IP")
}

func fail(cfg *config, c *fiber.Ctx, err error) error {
	if cfg.onError != nil {
		return cfg.onError(c, err)
	}
	code := adapter.Status(err)
	msg := "rate limiter error"
	if code == fiber.StatusBadRequest {
		msg = err.Error() // what the client must change
	}
	return fiber.NewError(code, msg)
}

// status is the response status a request will end with: an error that
// later handlers returned decides it (the app's error handler writes it
// after this middleware returns), as a *fiber.Error's code or 500.
func status(c *fiber.Ctx, err error) int {
	if err == nil {
		return c.Response().StatusCode()
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return fiber.StatusInternalServerError
}

// FromContext returns the Decision made for this request, when the
// middleware runs WithDecisionInContext.
func FromContext(c *fiber.Ctx) (gopherpace.Decision, bool) {
	d, ok := c.Locals(ContextKey).(gopherpace.Decision)
	return d, ok
}
