package ginpace

import (
	"net/netip"
	"time"

	"github.com/gin-gonic/gin"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// Option configures the middleware; New panics and Build returns an error
// on an invalid one.
type Option func(*config)

// config is the options every adapter shares, for Gin's requests.
type config = adapter.Config[*gin.Context, func(*gin.Context, gopherpace.Decision), func(*gin.Context, error), func(*gin.Context) int64]

func shared(o adapter.Option) Option { return func(c *config) { c.Share(o) } }

// WithKeyFunc sets how requests map to buckets. Default: the client's
// address (see WithTrustedProxies and WithIPv6Prefix).
func WithKeyFunc(f KeyFunc) Option {
	return func(c *config) { c.SetKey(f) }
}

// WithAlso makes every request pass l too, all or nothing, keyed by key
// (nil: the same key as the middleware's own limit), its policy named
// policy: 10 a second per client and 100 an hour per API key, say.
// [adapter.Also] has the rules.
func WithAlso(l *gopherpace.Limiter, key KeyFunc, policy string) Option {
	return func(c *config) { c.AddAlso(l, key, policy) }
}

// WithTrustedProxies trusts the forwarding fields (X-Forwarded-For, walked
// from the right, and X-Real-IP) of requests from these networks, for the
// default key. Without it, the connection's address is the client,
// whatever Gin's own SetTrustedProxies says.
func WithTrustedProxies(networks ...netip.Prefix) Option {
	return shared(adapter.TrustedProxies(networks...))
}

// WithIPv6Prefix groups IPv6 clients by their first bits bits for the
// default key. Default: 64.
func WithIPv6Prefix(bits int) Option { return shared(adapter.IPv6Prefix(bits)) }

// WithCost sets how many tokens a request spends. Default: 1. A cost
// below 1 or above the bucket size is answered as a bad request.
func WithCost(f func(*gin.Context) int64) Option {
	return func(c *config) { c.SetCost(f) }
}

// WithSkip exempts requests for which f returns true (health checks, say):
// they spend nothing and get no fields.
func WithSkip(f func(*gin.Context) bool) Option {
	return func(c *config) { c.SetSkip(f) }
}

// WithDenyHandler sets what answers a denied request. The rate-limit
// fields and Retry-After are already set. The request stops after it
// whether or not it aborts, so the route never runs, and if it writes
// nothing the default answer goes out. Default: abort with 429 and
// {"error": "rate limit exceeded", "retry_after_seconds": N}.
func WithDenyHandler(f func(*gin.Context, gopherpace.Decision)) Option {
	return func(c *config) { c.SetDeny(f) }
}

// WithErrorHandler sets what answers a request whose key or cost the
// limiter cannot use. As with WithDenyHandler, the request stops after it
// and an empty answer is replaced by the default. Default: record the error with
// c.Error and abort with 400 for the request's own faults (no key, a cost
// out of range) or 500 otherwise (see adapter.Status), JSON bodied.
func WithErrorHandler(f func(*gin.Context, error)) Option {
	return func(c *config) { c.SetOnError(f) }
}

// WithUsage charges each admitted request what it used, measured after
// its handler (an LLM answer's tokens, bytes sent), instead of only the
// cost it was admitted with (WithCost): f returns it.
// [adapter.Gate.Settle] has how the difference is charged or given back.
// f reads the usage the handler left: a value it set (c.Set), or a
// response header (c.Writer.Header()).
func WithUsage(f func(*gin.Context) int64) Option {
	return func(c *config) { c.SetUsage(f) }
}

// WithHeaders selects the rate-limit fields of every limited response.
// Default: headers.Draft.
func WithHeaders(style headers.Style) Option { return shared(adapter.Headers(style)) }

// WithPolicyName names the policy in the draft fields. Default:
// headers.DefaultPolicy.
func WithPolicyName(name string) Option { return shared(adapter.PolicyName(name)) }

// WithRefund gives back a request's tokens when when reports true for its
// response's status: adapter.RefundFailed, adapter.RefundServerErrors, or
// a func of your own.
func WithRefund(when func(status int) bool) Option { return shared(adapter.Refund(when)) }

// WithMaxDelay shapes traffic instead of refusing it: a request whose
// tokens are due within d waits for them, and only one due later is
// denied. [adapter.MaxDelay] has the rules and how far d reaches.
func WithMaxDelay(d time.Duration) Option { return shared(adapter.MaxDelay(d)) }

// WithMaxQueue caps the requests waiting at once under WithMaxDelay; one
// more is denied at once. Default: no cap beyond what the delay allows.
func WithMaxQueue(n int) Option { return shared(adapter.MaxQueue(n)) }

// WithConcurrency caps the requests in flight at once with f, across the
// cluster when f is clustered. [adapter.Concurrency] has the rules.
func WithConcurrency(f *gopherpace.InFlight) Option { return shared(adapter.Concurrency(f)) }

// WithConcurrencyPerKey is WithConcurrency with f's slots per request key
// (the client's address by default, or WithKeyFunc's), so that each
// client has at most f's limit in flight.
func WithConcurrencyPerKey(f *gopherpace.InFlight) Option {
	return shared(adapter.ConcurrencyPerKey(f))
}

// WithDecisionInContext stores each request's Decision in the Gin context
// for FromContext. Gin allocates its key map for it, so it is off by
// default.
func WithDecisionInContext() Option { return shared(adapter.DecisionInContext()) }

// The styles of rate-limit fields, for WithHeaders; package headers
// describes each.
const (
	DraftHeaders  = headers.Draft  // RateLimit-Policy and RateLimit: the default
	LegacyHeaders = headers.Legacy // X-RateLimit-Limit, -Remaining and -Reset
	BothHeaders   = headers.Both   // the draft and the legacy fields
	NoHeaders     = headers.None   // none; Retry-After still answers a denial
)

// RefundFailed, for WithRefund, gives back the tokens of responses with
// status 400 or above: only requests that succeed count.
func RefundFailed(status int) bool { return adapter.RefundFailed(status) }

// RefundServerErrors, for WithRefund, gives back the tokens of responses
// with status 500 or above, so that a failing backend does not also cost
// clients their quota.
func RefundServerErrors(status int) bool { return adapter.RefundServerErrors(status) }
