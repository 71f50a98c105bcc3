package echopace

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
)

// ContextKey is the Echo context key of the Decision
// (WithDecisionInContext).
const ContextKey = "gopherpace.decision"

// ErrRateLimitExceeded is the default answer to a denial.
var ErrRateLimitExceeded = echo.NewHTTPError(http.StatusTooManyRequests, "rate limit exceeded")

// RateLimiter returns Echo middleware that limits requests with l, for
// inline use as Echo's own RateLimiter:
//
//	e.Use(echopace.RateLimiter(limiter))
//
// It panics on a nil Limiter or an invalid option, as Echo's own does on a
// nil store; Build returns the error instead.
func RateLimiter(l *gopherpace.Limiter, opts ...Option) echo.MiddlewareFunc {
	mw, err := Build(l, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}

// Build is RateLimiter, returning an error naming every invalid option
// instead of panicking.
func Build(l *gopherpace.Limiter, opts ...Option) (echo.MiddlewareFunc, error) {
	m := &rateLimiter{}
	for _, o := range opts {
		if o == nil {
			m.cfg.require(false, "nil Option")
			continue
		}
		o(&m.cfg)
	}
	g, err := adapter.Configure(l, "echopace", m.cfg.shared, m.cfg.problems...)
	if err != nil {
		return nil, err
	}
	m.gate = g
	// Echo v4 builds the middleware chain for every request, so this
	// closure is allocated per request; it holds only two words.
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { return m.serve(c, next) }
	}, nil
}

type rateLimiter struct {
	cfg  config
	gate *adapter.Gate
}

func (m *rateLimiter) serve(c echo.Context, next echo.HandlerFunc) error {
	cfg, g := &m.cfg, m.gate
	if cfg.skip != nil && cfg.skip(c) {
		return next(c)
	}
	var req adapter.Request
	if cfg.key != nil {
		var err error
		if req.Keys[0], err = cfg.key(c); err != nil {
			return m.fail(c, err)
		}
	} else {
		var buf [64]byte
		b, err := g.RequestKey(buf[:0], c.Request())
		if err != nil {
			return m.fail(c, err)
		}
		req.Keys[0] = string(b)
	}
	for i, also := range cfg.also {
		req.Keys[i+1] = req.Keys[0]
		if also != nil {
			k, err := also(c)
			if err != nil {
				return m.fail(c, err)
			}
			req.Keys[i+1] = k
		}
	}
	req.Cost = 1
	if cfg.cost != nil {
		req.Cost = cfg.cost(c)
	}
	if err := g.Decide(&req); err != nil {
		return m.fail(c, err)
	}
	d := req.Decision()
	if g.HasFields(d) {
		g.SetHeaders(c.Response().Header(), &req)
	}
	if g.DecisionInContext() {
		c.Set(ContextKey, d)
	}
	if !d.Allowed {
		if cfg.deny != nil {
			return cfg.deny(c, d)
		}
		return ErrRateLimitExceeded
	}
	err := next(c)
	if g.Refunds() {
		g.Settle(&req, status(c, err))
	}
	return err
}

func (m *rateLimiter) fail(c echo.Context, err error) error {
	if m.cfg.onError != nil {
		return m.cfg.onError(c, err)
	}
	code := adapter.Status(err)
	msg := http.StatusText(code)
	if code == http.StatusBadRequest {
		msg = err.Error() // what the client must change
	}
	return &echo.HTTPError{Code: code, Message: msg, Internal: err}
}

// status is the status a request will end with: an error the handler
// returned decides it (the HTTPErrorHandler writes it after the middleware
// returns), as an *echo.HTTPError's code or 500.
func status(c echo.Context, err error) int {
	if err == nil {
		return c.Response().Status
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return he.Code
	}
	return http.StatusInternalServerError
}

// FromContext returns the Decision made for this request, when the
// middleware runs WithDecisionInContext.
func FromContext(c echo.Context) (gopherpace.Decision, bool) {
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
