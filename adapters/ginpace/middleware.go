package ginpace

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// ContextKey is the Gin context key of the Decision (WithDecisionInContext).
const ContextKey = "gopherpace.decision"

// New returns Gin middleware that limits requests with l.
func New(l *gopherpace.Limiter, opts ...Option) (gin.HandlerFunc, error) {
	if l == nil {
		return nil, errors.New("ginpace: nil Limiter")
	}
	cfg := config{key: ClientIPKey}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("ginpace: nil Option")
		}
		o(&cfg)
	}
	if len(cfg.errs) > 0 {
		return nil, errors.Join(cfg.errs...)
	}
	r, err := headers.New(cfg.style, cfg.policy)
	if err != nil {
		return nil, errors.New("ginpace: " + err.Error())
	}
	return func(c *gin.Context) { serve(l, &cfg, r, c) }, nil
}

func serve(l *gopherpace.Limiter, cfg *config, r headers.Renderer, c *gin.Context) {
	if cfg.skip != nil && cfg.skip(c) {
		c.Next()
		return
	}
	key, err := cfg.key(c)
	if err != nil {
		fail(cfg, c, err)
		return
	}
	cost := int64(1)
	if cfg.cost != nil {
		cost = cfg.cost(c)
	}
	now := time.Now()
	d, err := l.TakeAt(now, key, cost)
	if err != nil {
		fail(cfg, c, err)
		return
	}
	if r.Style() != headers.None || !d.Allowed {
		var buf [headers.MaxFields]headers.Field
		for _, f := range r.Append(buf[:0], d, now) {
			c.Header(f.Name, f.Value)
		}
	}
	if cfg.inContext {
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
}

func fail(cfg *config, c *gin.Context, err error) {
	if cfg.onError != nil {
		cfg.onError(c, err)
		return
	}
	_ = c.Error(err)
	c.AbortWithStatus(http.StatusInternalServerError)
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
