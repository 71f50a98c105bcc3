package echo5pace

import (
	"context"
	"net/netip"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
)

// ContextKey is the Echo context key of the Decision
// (WithDecisionInContext).
const ContextKey = "gopherpace.decision"

// ErrRateLimitExceeded is the default answer to a denial.
var ErrRateLimitExceeded = echo.NewHTTPError(adapter.DeniedStatus, adapter.DeniedMessage)

// RateLimiter returns Echo middleware that limits requests with l, for
// inline use as Echo's own RateLimiter:
//
//	e.Use(echo5pace.RateLimiter(limiter))
//
// It panics on a nil Limiter or an invalid option, as Echo's own does on a
// nil store; Build returns the error instead.
func RateLimiter(l *gopherpace.Limiter, opts ...Option) echo.MiddlewareFunc {
	return adapter.Must(Build(l, opts...))
}

// Build is RateLimiter, returning an error naming every invalid option
// instead of panicking.
func Build(l *gopherpace.Limiter, opts ...Option) (echo.MiddlewareFunc, error) {
	m := &rateLimiter{}
	adapter.Apply(&m.cfg, opts, m.cfg.Require)
	var err error
	m.gate, m.flow, err = m.cfg.Build(l, "echo5pace", adapter.Hooks[*echo.Context]{
		Peer:      func(c *echo.Context) (netip.Addr, string) { return adapter.RequestPeer(c.Request()) },
		Forwarded: func(c *echo.Context) ([]string, string) { return adapter.RequestForwarded(c.Request()) },
		Context:   func(c *echo.Context) context.Context { return c.Request().Context() },
	})
	if err != nil {
		return nil, err
	}
	// Echo v5 builds the chain once: nothing here is allocated per request.
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error { return m.serve(c, next) }
	}, nil
}

type rateLimiter struct {
	cfg  config
	gate *adapter.Gate
	flow *adapter.Flow[*echo.Context]
}

func (m *rateLimiter) serve(c *echo.Context, next echo.HandlerFunc) error {
	var req adapter.Request
	step := m.flow.Decide(c, &req)
	switch step {
	case adapter.Skip:
		return next(c)
	case adapter.Fail:
		return m.fail(c, req.Err())
	}
	g := m.gate
	if g.HasFields(&req) {
		g.SetHeaders(c.Response().Header(), &req)
	}
	if g.DecisionInContext() {
		c.Set(ContextKey, req.Decision())
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
		return ErrRateLimitExceeded
	}
	if req.HoldsSlot() {
		defer req.Done() // a panicking handler gives its slot back too
	}
	err := next(c)
	if g.Refunds() {
		m.flow.Finish(&req, status(c, err))
	}
	if m.cfg.Usage != nil {
		g.Settle(&req, m.cfg.Usage(c))
	}
	return err
}

func (m *rateLimiter) fail(c *echo.Context, err error) error {
	if m.cfg.OnError != nil {
		if herr := m.cfg.OnError(c, err); herr != nil || responded(c) {
			return herr
		}
	}
	code, msg := adapter.Answer(err)
	return echo.HTTPError{Code: code, Message: msg}.Wrap(err)
}

// status is the status a request will end with, as Echo v5 resolves it:
// the response's if it is written, else an error the handler returned
// decides it (the HTTPErrorHandler writes it after the middleware
// returns): its StatusCode, or 500.
func status(c *echo.Context, err error) int {
	_, code := echo.ResolveResponseStatus(c.Response(), err)
	return code
}

// FromContext returns the Decision made for this request, when the
// middleware runs WithDecisionInContext.
func FromContext(c *echo.Context) (gopherpace.Decision, bool) {
	d, ok := c.Get(ContextKey).(gopherpace.Decision)
	return d, ok
}

// Store adapts a Limiter to Echo's middleware.RateLimiterStore: each Allow
// spends one token of the identifier's bucket.
type Store struct{ l *gopherpace.Limiter }

var _ middleware.RateLimiterStore = Store{}

// NewStore returns a drop-in store for Echo's own RateLimiter middleware.
func NewStore(l *gopherpace.Limiter) Store { return Store{l} }

// Allow spends one token of identifier's bucket.
func (s Store) Allow(identifier string) (bool, error) {
	d, err := s.l.Take(identifier, 1)
	return d.Allowed, err
}

// responded reports whether a handler has answered the request.
func responded(c *echo.Context) bool {
	r, err := echo.UnwrapResponse(c.Response())
	return err == nil && r.Committed
}
