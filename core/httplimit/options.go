package httplimit

import (
	"errors"
	"net/http"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// Option configures a Middleware; New reports invalid values as errors.
type Option func(*config)

type config struct {
	key       KeyFunc
	cost      func(*http.Request) int64
	skip      func(*http.Request) bool
	deny      func(http.ResponseWriter, *http.Request, gopherpace.Decision)
	onError   func(http.ResponseWriter, *http.Request, error)
	style     headers.Style
	policy    string
	inContext bool
	errs      []error
}

func (c *config) require(ok bool, msg string) {
	if !ok {
		c.errs = append(c.errs, errors.New("httplimit: "+msg))
	}
}

// WithKeyFunc sets how requests map to buckets. Default: GlobalKey.
func WithKeyFunc(f KeyFunc) Option {
	return func(c *config) { c.require(f != nil, "nil KeyFunc"); c.key = f }
}

// WithCost sets how many tokens a request spends. Default: 1.
func WithCost(f func(*http.Request) int64) Option {
	return func(c *config) { c.require(f != nil, "nil cost func"); c.cost = f }
}

// WithSkip exempts requests for which f returns true (health checks, say);
// they spend nothing and get no headers.
func WithSkip(f func(*http.Request) bool) Option {
	return func(c *config) { c.require(f != nil, "nil skip func"); c.skip = f }
}

// WithDenyHandler sets what answers a denied request. The rate-limit
// headers and Retry-After are already set on w when it runs. Default: 429
// with a short text body.
func WithDenyHandler(f func(http.ResponseWriter, *http.Request, gopherpace.Decision)) Option {
	return func(c *config) { c.require(f != nil, "nil deny handler"); c.deny = f }
}

// WithErrorHandler sets what answers a request whose key or cost could not
// be worked out. Default: 400 for ErrMissingKey, 500 otherwise.
func WithErrorHandler(f func(http.ResponseWriter, *http.Request, error)) Option {
	return func(c *config) { c.require(f != nil, "nil error handler"); c.onError = f }
}

// WithHeaders selects the rate-limit headers sent on every limited
// response. Default: headers.Draft.
func WithHeaders(style headers.Style) Option {
	return func(c *config) { c.style = style }
}

// WithPolicyName names the policy in the draft headers. Default:
// headers.DefaultPolicy.
func WithPolicyName(name string) Option {
	return func(c *config) {
		if err := headers.CheckPolicyName(name); err != nil {
			c.errs = append(c.errs, errors.New("httplimit: "+err.Error()))
		}
		c.policy = name
	}
}

// WithDecisionInContext makes the Decision available to handlers through
// FromContext. It costs an allocation per request, so it is off by default.
func WithDecisionInContext() Option {
	return func(c *config) { c.inContext = true }
}
