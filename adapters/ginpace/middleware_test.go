package ginpace

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

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

func limiter(t *testing.T, rate, burst int64) *gopherpace.Limiter {
	t.Helper()
	l, err := gopherpace.New(gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(burst))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestErrorHandlerSeesTheError(t *testing.T) {
	var seen error
	r := engine(limiter(t, 1, 1), WithCost(func(*gin.Context) int64 { return 2 }),
		WithErrorHandler(func(c *gin.Context, err error) {
			seen = err
			c.AbortWithStatus(http.StatusRequestEntityTooLarge)
		}))
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if w.Code != 413 || !errors.Is(seen, gopherpace.ErrCostExceedsLimit) {
		t.Fatalf("%d, %v; want the handler's 413 for ErrCostExceedsLimit", w.Code, seen)
	}
}

func TestInvalidOptions(t *testing.T) {
	l := limiter(t, 1, 1)
	invalid := map[string][]Option{
		"nil key": {WithKeyFunc(nil)}, "nil cost": {WithCost(nil)}, "nil skip": {WithSkip(nil)},
		"nil deny": {WithDenyHandler(nil)}, "nil error": {WithErrorHandler(nil)}, "nil refund": {WithRefund(nil)},
		"style": {WithHeaders(9)}, "policy": {WithPolicyName("")}, "nil option": {nil},
		"IPv6 prefix": {WithIPv6Prefix(200)},
	}
	conformance.RejectsInvalidOptions(t, "ginpace", invalid,
		func(opts ...Option) error { _, err := Build(l, opts...); return err },
		func(opts ...Option) { New(l, opts...) })
	conformance.KeepsErrorChains(t, "ginpace", WithPolicyName, func(opts ...Option) error { _, err := Build(l, opts...); return err })
	if _, err := Build(nil); err == nil {
		t.Error("nil limiter: no error")
	}
}

// In a synctest bubble the clock is virtual: the bucket refills exactly
// when its rate says, with no sleeping in real time.
func TestRefillsWithVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := engine(limiter(t, 2, 1))
		code := func() int {
			w := httptest.NewRecorder()
			r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
			return w.Code
		}
		codes := []int{code(), code()}
		time.Sleep(499 * time.Millisecond)
		codes = append(codes, code())
		time.Sleep(time.Millisecond) // one token at 2/s after 500ms
		codes = append(codes, code())
		if fmt.Sprint(codes) != "[200 429 429 200]" {
			t.Fatalf("codes %v, want [200 429 429 200]", codes)
		}
	})
}
