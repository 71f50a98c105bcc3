package ginpace

import (
	"net/http"

	"github.com/gin-gonic/gin"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// ContextKey is the Gin context key of the Decision (WithDecisionInContext).
const ContextKey = "gopherpace.decision"

// New returns Gin middleware that limits requests with l, for inline use:
//
//	r.Use(ginpace.New(limiter))
//
// It panics on a nil Limiter or an invalid option, as a misconfigured
// server should not start; Build returns the error instead.
func New(l *gopherpace.Limiter, opts ...Option) gin.HandlerFunc {
	h, err := Build(l, opts...)
	if err != nil {
		panic(err)
	}
	return h
}

// Build is New, returning an error naming every invalid option instead of
// panicking.
func Build(l *gopherpace.Limiter, opts ...Option) (gin.HandlerFunc, error) {
	var cfg config
	for _, o := range opts {
		if o == nil {
			cfg.require(false, "nil Option")
			continue
		}
		o(&cfg)
	}
	g, err := adapter.Configure(l, "ginpace", cfg.shared, cfg.problems...)
	if err != nil {
		return nil, err
	}
	return func(c *gin.Context) { serve(g, &cfg, c) }, nil
}

func serve(g *adapter.Gate, cfg *config, c *gin.Context) {
	if cfg.skip != nil && cfg.skip(c) {
		c.Next()
		return
	}
	var req adapter.Request
	if cfg.key != nil {
		var err error
		if req.Keys[0], err = cfg.key(c); err != nil {
			fail(cfg, c, err)
			return
		}
	} else {
		var buf [64]byte
		b, err := g.RequestKey(buf[:0], c.Request)
		if err != nil {
			fail(cfg, c, err)
			return
		}
		req.Keys[0] = string(b)
	}
	for i, also := range cfg.also {
		req.Keys[i+1] = req.Keys[0]
		if also != nil {
			k, err := also(c)
			if err != nil {
				fail(cfg, c, err)
				return
			}
			req.Keys[i+1] = k
		}
	}
	req.Cost = 1
	if cfg.cost != nil {
		req.Cost = cfg.cost(c)
	}
	if err := g.Decide(&req); err != nil {
		fail(cfg, c, err)
		return
	}
	d := req.Decision()
	if g.HasFields(d) {
		g.SetHeaders(c.Writer.Header(), &req)
	}
	if g.DecisionInContext() {
		c.Set(ContextKey, d)
	}
	if !d.Allowed {
		if cfg.deny != nil {
			cfg.deny(c, d)
			return
		}
		c.AbortWithStatusJSON(http.StatusTooManyRequests, gin.H{
			"error":               "rate limit exceeded",
			"retry_after_seconds": headers.RetryAfterSeconds(d.RetryAfter),
		})
		return
	}
	c.Next()
	if g.Refunds() {
		g.Settle(&req, c.Writer.Status())
	}
}

func fail(cfg *config, c *gin.Context, err error) {
	if cfg.onError != nil {
		cfg.onError(c, err)
		return
	}
	_ = c.Error(err)
	code := adapter.Status(err)
	msg := http.StatusText(code)
	if code == http.StatusBadRequest {
		msg = err.Error() // what the client must change
	}
	c.AbortWithStatusJSON(code, gin.H{"error": msg})
}

// FromContext returns the Decision made for this request, when the
// middleware runs WithDecisionInContext.
func FromContext(c *gin.Context) (gopherpace.Decision, bool) {
	v, ok := c.Get(ContextKey)
	if !ok {
		return gopherpace.Decision{}, false
	}
	d, ok := v.(gopherpace.Decision)
	return d, ok
}
