package ginpace

import (
	"context"
	"net/netip"

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
	return adapter.Must(Build(l, opts...))
}

// Build is New, returning an error naming every invalid option instead of
// panicking.
func Build(l *gopherpace.Limiter, opts ...Option) (gin.HandlerFunc, error) {
	m := &middleware{}
	adapter.Apply(&m.cfg, opts, m.cfg.Require)
	var err error
	m.gate, m.flow, err = m.cfg.Build(l, "ginpace", adapter.Hooks[*gin.Context]{
		Peer:      func(c *gin.Context) (netip.Addr, string) { return adapter.RequestPeer(c.Request) },
		Forwarded: func(c *gin.Context) ([]string, string) { return adapter.RequestForwarded(c.Request) },
		Context:   func(c *gin.Context) context.Context { return c.Request.Context() },
	})
	if err != nil {
		return nil, err
	}
	return m.serve, nil
}

type middleware struct {
	cfg  config
	gate *adapter.Gate
	flow *adapter.Flow[*gin.Context]
}

func (m *middleware) serve(c *gin.Context) {
	var req adapter.Request
	step := m.flow.Decide(c, &req)
	switch step {
	case adapter.Skip:
		c.Next()
		return
	case adapter.Fail:
		m.fail(c, req.Err())
		return
	}
	g := m.gate
	if g.HasFields(&req) {
		g.SetHeaders(c.Writer.Header(), &req)
	}
	if g.DecisionInContext() {
		c.Set(ContextKey, req.Decision())
	}
	if step == adapter.Deny {
		d := req.Decision()
		if m.cfg.Deny != nil {
			m.cfg.Deny(c, d)
			// The request stops here whatever the handler did: one that
			// wrote an answer but did not abort would let the route run,
			// and one that wrote nothing gets the default denial.
			c.Abort()
			if c.Writer.Written() {
				return
			}
		}
		c.AbortWithStatusJSON(adapter.DeniedStatus, gin.H{
			"error":               adapter.DeniedMessage,
			"retry_after_seconds": headers.RetryAfterSeconds(d.RetryAfter),
		})
		return
	}
	if req.HoldsSlot() {
		defer req.Done() // a panicking handler gives its slot back too
	}
	c.Next()
	if g.Refunds() {
		m.flow.Finish(&req, c.Writer.Status())
	}
	if m.cfg.Usage != nil {
		g.Settle(&req, m.cfg.Usage(c))
	}
}

func (m *middleware) fail(c *gin.Context, err error) {
	if m.cfg.OnError != nil {
		m.cfg.OnError(c, err)
		c.Abort() // as after a denial
		if c.Writer.Written() {
			return
		}
	}
	_ = c.Error(err)
	code, msg := adapter.Answer(err)
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
