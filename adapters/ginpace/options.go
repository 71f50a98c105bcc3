package ginpace

import (
	"errors"

	"github.com/gin-gonic/gin"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// Option configures the middleware; New reports invalid values.
type Option func(*config)

// KeyFunc picks the bucket for a request; "" is the limiter's global bucket.
type KeyFunc func(c *gin.Context) (string, error)

type config struct {
	key       KeyFunc
	cost      func(*gin.Context) int64
	skip      func(*gin.Context) bool
	deny      func(*gin.Context, gopherpace.Decision)
	onError   func(*gin.Context, error)
	style     headers.Style
	policy    string
	inContext bool
	errs      []error
}

func (c *config) require(ok bool, msg string) {
	if !ok {
		c.errs = append(c.errs, errors.New("ginpace: "+msg))
	}
}

// ClientIPKey keys requests by c.ClientIP() (the default).
func ClientIPKey(c *gin.Context) (string, error) { return c.ClientIP(), nil }

// GlobalKey puts every request in the limiter's global bucket.
func GlobalKey(*gin.Context) (string, error) { return "", nil }

// RouteKey keys requests by client IP and route pattern, so each route has
// its own budget per client.
func RouteKey(c *gin.Context) (string, error) { return c.ClientIP() + " " + c.FullPath(), nil }

// WithKeyFunc sets how requests map to buckets. Default: ClientIPKey.
func WithKeyFunc(f KeyFunc) Option {
	return func(c *config) { c.require(f != nil, "nil KeyFunc"); c.key = f }
}

// WithCost sets how many tokens a request spends. Default: 1.
func WithCost(f func(*gin.Context) int64) Option {
	return func(c *config) { c.require(f != nil, "nil cost func"); c.cost = f }
}

// WithSkip exempts requests for which f returns true.
func WithSkip(f func(*gin.Context) bool) Option {
	return func(c *config) { c.require(f != nil, "nil skip func"); c.skip = f }
}

// WithDenyHandler replaces the default denial, which aborts with 429 and
// {"error": "rate limit exceeded", "retry_after_seconds": N}. Headers are
// already set; the handler must abort.
func WithDenyHandler(f func(*gin.Context, gopherpace.Decision)) Option {
	return func(c *config) { c.require(f != nil, "nil deny handler"); c.deny = f }
}

// WithErrorHandler replaces the default answer to a key or cost error,
// which records the error with c.Error and aborts with 500. The handler
// must abort.
func WithErrorHandler(f func(*gin.Context, error)) Option {
	return func(c *config) { c.require(f != nil, "nil error handler"); c.onError = f }
}

// WithHeaders selects the rate-limit headers. Default: headers.Draft.
func WithHeaders(style headers.Style) Option {
	return func(c *config) { c.style = style }
}

// WithPolicyName names the policy in the draft headers.
func WithPolicyName(name string) Option {
	return func(c *config) {
		c.require(headers.CheckPolicyName(name) == nil, headers.ErrPolicyName.Error())
		c.policy = name
	}
}

// WithDecisionInContext stores each request's Decision in the Gin context
// for FromContext. Gin allocates its key map for it, so it is off by default.
func WithDecisionInContext() Option { return func(c *config) { c.inContext = true } }
