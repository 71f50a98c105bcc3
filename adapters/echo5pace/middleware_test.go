package echo5pace

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/conformance"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// adapterOptions are this package's options in the conformance suite's terms.
var adapterOptions = conformance.Options[Option]{
	GlobalKey: func() Option { return WithKeyFunc(GlobalKey) },
	HeaderKey: func(name string) Option { return WithKeyFunc(HeaderKey(name)) },
	KeyError: func(err error) Option {
		return WithKeyFunc(func(*echo.Context) (string, error) { return "", err })
	},
	TrustedProxies: WithTrustedProxies,
	IPv6Prefix:     WithIPv6Prefix,
	CostFromHeader: func(name string) Option {
		return WithCost(func(c *echo.Context) int64 { return conformance.Cost(c.Request().Header.Get(name)) })
	},
	SkipPath:   func(path string) Option { return WithSkip(func(c *echo.Context) bool { return c.Path() == path }) },
	Refund:     WithRefund,
	PolicyName: WithPolicyName,
	Headers:    WithHeaders,
	DenyHandler: func(h conformance.Handler) Option {
		return WithDenyHandler(func(c *echo.Context, d gopherpace.Decision) error {
			switch h {
			case conformance.Answering:
				c.Response().Header().Set("X-Denied-Remaining", fmt.Sprint(d.Remaining))
				return c.String(http.StatusTooManyRequests, "denied")
			case conformance.Careless: // its error dropped
				_ = c.String(http.StatusTooManyRequests, "denied")
			}
			return nil
		})
	},
	ErrorHandler: func(h conformance.Handler) Option {
		return WithErrorHandler(func(c *echo.Context, err error) error {
			switch h {
			case conformance.Answering:
				c.Response().Header().Set("X-Error", conformance.ErrorName(err))
				return c.String(http.StatusServiceUnavailable, "failed")
			case conformance.Careless:
				_ = c.String(http.StatusServiceUnavailable, "failed")
			}
			return nil
		})
	},
	DecisionInContext: WithDecisionInContext,
	UsageFromHeader: func(name string) Option {
		return WithUsage(func(c *echo.Context) int64 { return conformance.Cost(c.Request().Header.Get(name)) })
	},
	MaxDelay:          WithMaxDelay,
	Concurrency:       WithConcurrency,
	ConcurrencyPerKey: WithConcurrencyPerKey,
	AlsoFromHeader: func(l *gopherpace.Limiter, name, policy string) Option {
		return WithAlso(l, HeaderKey(name), policy)
	},
	NilFuncs: []Option{WithKeyFunc(nil), WithCost(nil), WithSkip(nil), WithDenyHandler(nil), WithErrorHandler(nil), WithUsage(nil)},
}

// newEcho is an Echo app whose IPExtractor trusts X-Forwarded-For from
// anyone: the adapter must not.
func newEcho(mw echo.MiddlewareFunc) *echo.Echo {
	e := echo.New()
	e.IPExtractor = echo.ExtractIPFromXFFHeader(echo.TrustIPRange(mustCIDR("0.0.0.0/0")))
	e.Use(mw)
	e.GET("/", func(c *echo.Context) error {
		conformance.Hold(c.Request().Header.Get("X-Hold"))
		if d, ok := FromContext(c); ok {
			c.Response().Header().Set("X-Remaining", fmt.Sprint(d.Remaining))
		}
		return c.String(http.StatusOK, "ok")
	})
	// A failure returned as an error: the HTTPErrorHandler writes it after
	// the middleware has returned, and a refund must still see 500.
	e.GET("/fail", func(c *echo.Context) error { return errors.New("failed") })
	e.GET("/skip", func(c *echo.Context) error { return c.String(http.StatusOK, "ok") })
	return e
}

func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T, l *gopherpace.Limiter, s conformance.Setup) string {
		srv := httptest.NewServer(newEcho(RateLimiter(l, conformance.OptionsFor(s, adapterOptions)...)))
		t.Cleanup(srv.Close)
		return srv.URL
	})
}

func serve(e *echo.Echo, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w
}

// A denial is an *echo.HTTPError, so the application's HTTPErrorHandler
// answers it, with the fields already set.
func TestDenialGoesThroughTheAppErrorHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEcho(RateLimiter(conformance.Limiter(t, 1, 1)))
		e.HTTPErrorHandler = func(c *echo.Context, err error) {
			var he *echo.HTTPError
			if errors.As(err, &he) {
				_ = c.JSON(he.Code, map[string]any{"problem": he.Message})
			}
		}
		serve(e, "/")
		w := serve(e, "/")
		if w.Code != 429 || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), `"problem":"rate limit exceeded"`) {
			t.Fatalf("%d %v %q", w.Code, w.Header(), w.Body.String())
		}
	})
}

func TestInvalidOptions(t *testing.T) {
	conformance.CheckOptions(t, "echo5pace", adapterOptions,
		func(l *gopherpace.Limiter, opts ...Option) error { _, err := Build(l, opts...); return err },
		func(l *gopherpace.Limiter, opts ...Option) { RateLimiter(l, opts...) })
}

func TestStoreDropsIntoEchosOwnMiddleware(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEcho(middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{Store: NewStore(conformance.Limiter(t, 1, 1))}))
		if a, b := serve(e, "/").Code, serve(e, "/").Code; a != 200 || b != 429 {
			t.Fatalf("codes %d %d", a, b)
		}
	})
}

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

func TestRefillsWithVirtualTime(t *testing.T) {
	conformance.RefillsWithVirtualTime(t, func(t *testing.T, l *gopherpace.Limiter) func(string) int {
		e := newEcho(RateLimiter(l))
		return func(path string) int { return serve(e, path).Code }
	})
}
