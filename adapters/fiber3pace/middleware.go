package fiber3pace

import (
	"context"
	"errors"
	"net/netip"
	"unsafe"

	"github.com/gofiber/fiber/v3"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// ContextKey is the c.Locals key of the Decision (WithDecisionInContext).
const ContextKey = "gopherpace.decision"

// New returns Fiber middleware that limits requests with l, for inline use
// as Fiber's own limiter:
//
//	app.Use(fiber3pace.New(limiter))
//
// It panics on a nil Limiter or an invalid option, as a misconfigured
// server should not start; Build returns the error instead.
func New(l *gopherpace.Limiter, opts ...Option) fiber.Handler {
	return adapter.Must(Build(l, opts...))
}

// Build is New, returning an error naming every invalid option instead of
// panicking.
func Build(l *gopherpace.Limiter, opts ...Option) (fiber.Handler, error) {
	m := &middleware{}
	adapter.Apply(&m.cfg, opts, m.cfg.Require)
	var err error
	m.gate, m.flow, err = m.cfg.Build(l, "fiber3pace", adapter.Hooks[fiber.Ctx]{
		Peer: peer, Forwarded: forwarded,
		Context: func(c fiber.Ctx) context.Context { return c.Context() },
		// fasthttp reuses a request's bytes once its handler returns.
		KeysOutliveRequest: true,
	})
	if err != nil {
		return nil, err
	}
	return m.serve, nil
}

// The draft fields' names, for fasthttp's setters: most responses carry
// just these two (Gate.AdmittedDraft).
var rateLimitPolicy, rateLimit = []byte(headers.RateLimitPolicy), []byte(headers.RateLimit)

type middleware struct {
	cfg  config
	gate *adapter.Gate
	flow *adapter.Flow[fiber.Ctx]
}

func (m *middleware) serve(c fiber.Ctx) error {
	var req adapter.Request
	step := m.flow.Decide(c, &req)
	switch step {
	case adapter.Skip:
		return c.Next()
	case adapter.Fail:
		return m.fail(c, req.Err())
	}
	g := m.gate
	if p, l, ok := g.AdmittedDraft(&req); ok {
		h := &c.Response().Header
		h.SetCanonical(rateLimitPolicy, unsafeBytes(p))
		h.SetCanonical(rateLimit, unsafeBytes(l))
	} else if g.HasFields(&req) {
		var f adapter.Fields
		g.RenderRequest(&f, &req)
		h := &c.Response().Header
		for i := range f.Len() {
			// The names are canonical already; fasthttp copies both.
			h.SetCanonical(unsafeBytes(f.Name(i)), unsafeBytes(f.Value(i)))
		}
	}
	if g.DecisionInContext() {
		c.Locals(ContextKey, req.Decision())
	}
	if step == adapter.Deny {
		d := req.Decision()
		if m.cfg.Deny != nil {
			// A handler that answers nothing gets the default denial, not
			// a 200.
			if err := m.cfg.Deny(c, d); err != nil || responded(c) {
				return err
			}
		}
		return c.Status(adapter.DeniedStatus).SendString(adapter.DeniedMessage)
	}
	if req.HoldsSlot() {
		defer req.Done() // a panicking handler gives its slot back too
	}
	err := c.Next()
	if g.Refunds() {
		m.flow.Finish(&req, status(c, err))
	}
	if m.cfg.Usage != nil {
		g.Settle(&req, m.cfg.Usage(c))
	}
	return err
}

// unsafeBytes is s as bytes, for fasthttp's setters, which copy them.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// peer is the connection's address, already parsed by fasthttp. A peer
// that is not TCP (a Unix socket) fails as no client IP, where fasthttp's
// RemoteIP would make every such client 0.0.0.0.
func peer(c fiber.Ctx) (netip.Addr, string) {
	return adapter.AddrPeer(c.RequestCtx().RemoteAddr())
}

// forwarded reads every X-Forwarded-For field, in order, and X-Real-IP.
func forwarded(c fiber.Ctx) (xff []string, realIP string) {
	for _, v := range c.Request().Header.PeekAll(fiber.HeaderXForwardedFor) {
		xff = append(xff, string(v))
	}
	return xff, c.Get("X-Real-IP")
}

func (m *middleware) fail(c fiber.Ctx, err error) error {
	if m.cfg.OnError != nil {
		if herr := m.cfg.OnError(c, err); herr != nil || responded(c) {
			return herr
		}
	}
	code, msg := adapter.Answer(err)
	return fiber.NewError(code, msg)
}

// status is the response status a request will end with: an error that
// later handlers returned decides it (the app's error handler writes it
// after this middleware returns), as a *fiber.Error's code or 500.
func status(c fiber.Ctx, err error) int {
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
func FromContext(c fiber.Ctx) (gopherpace.Decision, bool) {
	d, ok := c.Locals(ContextKey).(gopherpace.Decision)
	return d, ok
}

// responded reports whether a handler has answered the request: set a
// status other than 200 or written a body (fasthttp's response starts as
// an empty 200).
func responded(c fiber.Ctx) bool {
	return c.Response().StatusCode() != fiber.StatusOK || len(c.Response().Body()) > 0
}
