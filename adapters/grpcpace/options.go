package grpcpace

import (
	"context"
	"net/netip"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"google.golang.org/grpc/codes"
)

// Option configures an interceptor; the constructors panic, and
// BuildServer and BuildClient return an error, on an invalid one.
type Option func(*config)

type config struct {
	adapter.Options
	key      KeyFunc
	also     []KeyFunc // the keys of further limits, in order
	wait     bool
	cost     func(ctx context.Context, fullMethod string) int64
	skip     func(ctx context.Context, fullMethod string) bool
	deny     func(ctx context.Context, fullMethod string, d gopherpace.Decision) error
	refund   func(codes.Code) bool
	usage    func(ctx context.Context, fullMethod string, resp any, err error) int64
	failOpen bool
	perRecv  bool
	perSend  bool
}

func shared(o adapter.Option) Option { return func(c *config) { c.Share(o) } }

// WithKeyFunc sets how calls map to buckets. Default: the caller's address
// on servers (see WithTrustedProxies), GlobalKey on clients.
func WithKeyFunc(f KeyFunc) Option {
	return func(c *config) { c.Require(f != nil, "nil KeyFunc"); c.key = f }
}

// WithAlso makes every call pass l too, all or nothing, keyed by key (nil:
// the same key as the interceptor's own limit), its policy named policy
// in QuotaFailure details and the draft fields. [adapter.Also] has the
// rules.
func WithAlso(l *gopherpace.Limiter, key KeyFunc, policy string) Option {
	return func(c *config) {
		c.Share(adapter.Also(l, policy))
		c.also = append(c.also, key)
	}
}

// WithWait makes client interceptors wait for the tokens (Limiter.Wait)
// instead of failing a call at once: a call whose tokens would come after
// its deadline fails with codes.ResourceExhausted at once, and one whose
// context ends while it waits, with the context's code. Servers ignore
// it, and it applies to one limit only (not with WithAlso).
func WithWait() Option { return func(c *config) { c.wait = true } }

// WithTrustedProxies trusts the x-forwarded-for (walked from the right)
// and x-real-ip metadata of calls from these networks, for the default
// server key: an L7 proxy such as Envoy in front of the service names
// the caller there. Without it, the connection's address is the caller.
func WithTrustedProxies(networks ...netip.Prefix) Option {
	return shared(adapter.TrustedProxies(networks...))
}

// WithIPv6Prefix groups IPv6 callers by their first bits bits for the
// default server key. Default: 64.
func WithIPv6Prefix(bits int) Option { return shared(adapter.IPv6Prefix(bits)) }

// WithCost sets how many tokens a call (or, with WithPerMessage, a
// message) spends. Default: 1. A cost below 1 or above the bucket size
// fails the call with codes.InvalidArgument.
func WithCost(f func(ctx context.Context, fullMethod string) int64) Option {
	return func(c *config) { c.Require(f != nil, "nil cost func"); c.cost = f }
}

// WithSkip exempts calls for which f returns true (health checks, say).
func WithSkip(f func(ctx context.Context, fullMethod string) bool) Option {
	return func(c *config) { c.Require(f != nil, "nil skip func"); c.skip = f }
}

// WithDenyHandler sets the error a denied call fails with; a nil error
// is taken for the default, so a denied call never runs. Default:
// codes.ResourceExhausted with RetryInfo and QuotaFailure details (see
// the package doc). Server interceptors have sent the rate-limit header
// metadata, if any, when it runs.
func WithDenyHandler(f func(ctx context.Context, fullMethod string, d gopherpace.Decision) error) Option {
	return func(c *config) { c.Require(f != nil, "nil deny handler"); c.deny = f }
}

// WithRefund gives back a call's tokens when when reports true for the
// code it ended with (a server handler's, or a client call's); on streams,
// the code the stream ended with refunds the tokens of its opening.
func WithRefund(when func(codes.Code) bool) Option {
	return func(c *config) { c.Require(when != nil, "nil refund func"); c.refund = when }
}

// WithUsage charges each admitted call what it used, measured when it
// ends (an LLM answer's tokens, bytes sent), instead of only the cost it
// was admitted with (WithCost): f returns it, from the handler's context,
// the response (a client's reply; nil for streams) and the error. A
// client stream settles only when it fails to open.
// [adapter.Gate.Settle] has how the difference is charged or given back.
func WithUsage(f func(ctx context.Context, fullMethod string, resp any, err error) int64) Option {
	return func(c *config) { c.Require(f != nil, "nil usage func"); c.usage = f }
}

// WithFailOpen lets calls through when the limiter cannot decide: a key
// function's error other than ErrMissingKey (a caller that is not IP, say).
// Calls whose key or cost is their own fault still fail with
// codes.InvalidArgument. Default: such calls fail with codes.Internal.
func WithFailOpen() Option { return func(c *config) { c.failOpen = true } }

// WithPerMessage makes a server stream also spend tokens for every message
// it receives (recv) and sends (send), after the check at open. A denied
// message ends the stream with codes.ResourceExhausted. Client
// interceptors ignore it.
func WithPerMessage(recv, send bool) Option {
	return func(c *config) { c.perRecv, c.perSend = recv, send }
}

// WithPolicyName names the policy in QuotaFailure details and draft
// fields. Default: headers.DefaultPolicy.
func WithPolicyName(name string) Option { return shared(adapter.PolicyName(name)) }

// WithMaxDelay shapes calls instead of refusing them: a call whose tokens
// are due within d waits for them, and only one due later is refused
// ([adapter.MaxDelay] has the rules and how far d reaches). It does not
// combine with WithWait.
func WithMaxDelay(d time.Duration) Option { return shared(adapter.MaxDelay(d)) }

// WithMaxQueue caps the calls waiting at once under WithMaxDelay; one
// more is refused at once. Default: no cap beyond what the delay allows.
func WithMaxQueue(n int) Option { return shared(adapter.MaxQueue(n)) }

// WithHeaders sends rate-limit fields as response header metadata from
// server interceptors (lower-case names: ratelimit-policy, ratelimit,
// retry-after...). Default headers.None: metadata costs allocations on
// every call.
func WithHeaders(style headers.Style) Option { return shared(adapter.Headers(style)) }

// WithDecisionInContext puts each call's Decision in the handler's context
// for FromContext (servers only). It costs an allocation per call, so it
// is off by default.
func WithDecisionInContext() Option { return shared(adapter.DecisionInContext()) }

// The styles of rate-limit fields, for WithHeaders; package headers
// describes each.
const (
	DraftHeaders  = headers.Draft  // RateLimit-Policy and RateLimit: the default
	LegacyHeaders = headers.Legacy // X-RateLimit-Limit, -Remaining and -Reset
	BothHeaders   = headers.Both   // the draft and the legacy fields
	NoHeaders     = headers.None   // none; Retry-After still answers a denial
)
