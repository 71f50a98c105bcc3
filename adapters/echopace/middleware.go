package echopace

import (
	"errors"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// RateLimiter limits requests with l, one bucket per c.RealIP(). It panics
// if l is nil, as Echo's own RateLimiter does on a nil store.
func RateLimiter(l *gopherpace.Limiter) echo.MiddlewareFunc {
	return RateLimiterWithConfig(Config{Limiter: l})
}

// RateLimiterWithConfig is RateLimiter with a Config. It panics on an
// invalid Config, in Echo's style; ToMiddleware returns the error instead.
func RateLimiterWithConfig(cfg Config) echo.MiddlewareFunc {
	mw, err := cfg.ToMiddleware()
	if err != nil {
		panic(err)
	}
	return mw
}

// ToMiddleware checks the Config and builds the middleware.
func (cfg Config) ToMiddleware() (echo.MiddlewareFunc, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r, err := headers.New(cfg.Headers, cfg.PolicyName)
	if err != nil {
		return nil, errors.New("echopace: " + err.Error())
	}
	m := &rateLimiter{cfg: cfg, headers: r}
	// Echo v4 builds the middleware chain for every request, so this
	// closure is allocated per request; it holds only two words.
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { return m.serve(c, next) }
	}, nil
}

type rateLimiter struct {
	cfg     Config
	headers headers.Renderer
}

func (m *rateLimiter) serve(c echo.Context, next echo.HandlerFunc) error {
	cfg := &m.cfg
	if cfg.Skipper(c) {
		return next(c)
	}
	if cfg.BeforeFunc != nil {
		cfg.BeforeFunc(c)
	}
	id, err := cfg.IdentifierExtractor(c)
	if err != nil {
		return cfg.ErrorHandler(c, err)
	}
	cost := int64(1)
	if cfg.CostFunc != nil {
		cost = cfg.CostFunc(c)
	}
	now := time.Now()
	d, err := cfg.Limiter.TakeAt(now, id, cost)
	if err != nil {
		return cfg.ErrorHandler(c, err)
	}
	if m.headers.Style() != headers.None || !d.Allowed {
		m.headers.Set(c.Response().Header(), d, now)
	}
	if !d.Allowed {
		return cfg.DenyHandler(c, id, d)
	}
	return next(c)
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
