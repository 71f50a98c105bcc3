package ginpace

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/conformance"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	goleak.VerifyTestMain(m)
}

// adapterOptions are this package's options in the conformance suite's terms.
var adapterOptions = conformance.Options[Option]{
	GlobalKey: func() Option { return WithKeyFunc(GlobalKey) },
	HeaderKey: func(name string) Option { return WithKeyFunc(HeaderKey(name)) },
	KeyError: func(err error) Option {
		return WithKeyFunc(func(*gin.Context) (string, error) { return "", err })
	},
	TrustedProxies: WithTrustedProxies,
	IPv6Prefix:     WithIPv6Prefix,
	CostFromHeader: func(name string) Option {
		return WithCost(func(c *gin.Context) int64 { return conformance.Cost(c.GetHeader(name)) })
	},
	SkipPath: func(path string) Option {
		return WithSkip(func(c *gin.Context) bool { return c.Request.URL.Path == path })
	},
	Refund:     WithRefund,
	PolicyName: WithPolicyName,
	Headers:    WithHeaders,
	DenyHandler: func(h conformance.Handler) Option {
		return WithDenyHandler(func(c *gin.Context, d gopherpace.Decision) {
			switch h {
			case conformance.Answering:
				c.Header("X-Denied-Remaining", fmt.Sprint(d.Remaining))
				c.AbortWithStatus(http.StatusTooManyRequests)
				c.Writer.WriteString("denied")
			case conformance.Careless: // no Abort: the route would run
				c.String(http.StatusTooManyRequests, "denied")
			}
		})
	},
	ErrorHandler: func(h conformance.Handler) Option {
		return WithErrorHandler(func(c *gin.Context, err error) {
			switch h {
			case conformance.Answering:
				c.Header("X-Error", conformance.ErrorName(err))
				c.AbortWithStatus(http.StatusServiceUnavailable)
				c.Writer.WriteString("failed")
			case conformance.Careless:
				c.String(http.StatusServiceUnavailable, "failed")
			}
		})
	},
	DecisionInContext: WithDecisionInContext,
	UsageFromHeader: func(name string) Option {
		return WithUsage(func(c *gin.Context) int64 { return conformance.Cost(c.GetHeader(name)) })
	},
	MaxDelay:          WithMaxDelay,
	Concurrency:       WithConcurrency,
	ConcurrencyPerKey: WithConcurrencyPerKey,
	AlsoFromHeader: func(l *gopherpace.Limiter, name, policy string) Option {
		return WithAlso(l, HeaderKey(name), policy)
	},
	NilFuncs: []Option{WithKeyFunc(nil), WithCost(nil), WithSkip(nil), WithDenyHandler(nil), WithErrorHandler(nil), WithUsage(nil)},
}

// engine is a Gin engine as gin.New makes it, which trusts forwarding
// fields from every peer: the adapter must not.
func engine(l *gopherpace.Limiter, opts ...Option) *gin.Engine {
	r := gin.New()
	r.Use(New(l, opts...))
	r.GET("/", func(c *gin.Context) {
		conformance.Hold(c.GetHeader("X-Hold"))
		if d, ok := FromContext(c); ok {
			c.Header("X-Remaining", fmt.Sprint(d.Remaining))
		}
		c.String(http.StatusOK, "ok")
	})
	r.GET("/fail", func(c *gin.Context) { c.String(http.StatusInternalServerError, "failed") })
	r.GET("/skip", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	return r
}

func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T, l *gopherpace.Limiter, s conformance.Setup) string {
		srv := httptest.NewServer(engine(l, conformance.OptionsFor(s, adapterOptions)...))
		t.Cleanup(srv.Close)
		return srv.URL
	})
}

func TestInvalidOptions(t *testing.T) {
	conformance.CheckOptions(t, "ginpace", adapterOptions,
		func(l *gopherpace.Limiter, opts ...Option) error { _, err := Build(l, opts...); return err },
		func(l *gopherpace.Limiter, opts ...Option) { New(l, opts...) })
}

func TestRefillsWithVirtualTime(t *testing.T) {
	conformance.RefillsWithVirtualTime(t, func(t *testing.T, l *gopherpace.Limiter) func(string) int {
		r := engine(l)
		return func(path string) int {
			w := httptest.NewRecorder()
			r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
			return w.Code
		}
	})
}
