package grpcpace

import (
	"context"
	"errors"
	"net"
	"net/netip"

	"github.com/pedreviljoen/gopherpace/core/clientip"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// KeyFunc picks the bucket for a call; "" is the limiter's global bucket.
type KeyFunc func(ctx context.Context, fullMethod string) (string, error)

// ErrMissingKey is returned by MetadataKey when the call lacks the value.
var ErrMissingKey = errors.New("grpcpace: call has no rate-limit key")

// PeerKey keys calls by the peer's IP address (IPv6 by /64); peers that are
// not IP (a Unix socket, bufconn) are keyed by their address string.
func PeerKey(ctx context.Context, _ string) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "", errors.New("grpcpace: call has no peer")
	}
	if ta, ok := p.Addr.(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(ta.IP); ok {
			return clientip.Key(a), nil
		}
	}
	return p.Addr.String(), nil
}

// MetadataKey keys calls by the first value of an incoming (server) or
// outgoing (client) metadata key, such as an API key.
func MetadataKey(name string) KeyFunc {
	return func(ctx context.Context, _ string) (string, error) {
		if v := metadata.ValueFromIncomingContext(ctx, name); len(v) > 0 && v[0] != "" {
			return v[0], nil
		}
		if md, ok := metadata.FromOutgoingContext(ctx); ok {
			if v := md.Get(name); len(v) > 0 && v[0] != "" {
				return v[0], nil
			}
		}
		return "", ErrMissingKey
	}
}

// MethodKey keys calls by full method name: one bucket per method.
func MethodKey(_ context.Context, fullMethod string) (string, error) { return fullMethod, nil }

// GlobalKey puts every call in the limiter's global bucket.
func GlobalKey(context.Context, string) (string, error) { return "", nil }

// Option configures an interceptor; the constructors report invalid values.
type Option func(*config)

type config struct {
	key      KeyFunc
	cost     func(ctx context.Context, fullMethod string) int64
	skip     func(ctx context.Context, fullMethod string) bool
	failOpen bool
	perRecv  bool
	perSend  bool
	policy   string
	headers  headers.Style
	errs     []error
}

func (c *config) require(ok bool, msg string) {
	if !ok {
		c.errs = append(c.errs, errors.New("grpcpace: "+msg))
	}
}

// WithKeyFunc sets how calls map to buckets. Default: PeerKey on servers,
// GlobalKey on clients.
func WithKeyFunc(f KeyFunc) Option {
	return func(c *config) { c.require(f != nil, "nil KeyFunc"); c.key = f }
}

// WithCost sets how many tokens a call (or, with WithPerMessage, a
// message) spends. Default: 1.
func WithCost(f func(ctx context.Context, fullMethod string) int64) Option {
	return func(c *config) { c.require(f != nil, "nil cost func"); c.cost = f }
}

// WithSkip exempts calls for which f returns true (health checks, say).
func WithSkip(f func(ctx context.Context, fullMethod string) bool) Option {
	return func(c *config) { c.require(f != nil, "nil skip func"); c.skip = f }
}

// WithFailOpen lets calls through when the limiter cannot decide (key or
// cost errors) instead of failing them with codes.Unavailable.
func WithFailOpen() Option { return func(c *config) { c.failOpen = true } }

// WithPerMessage makes a server stream also spend tokens for every message
// it receives (recv) and sends (send), after the check at open. A denied
// message ends the stream with codes.ResourceExhausted.
func WithPerMessage(recv, send bool) Option {
	return func(c *config) { c.perRecv, c.perSend = recv, send }
}

// WithPolicyName names the policy in QuotaFailure details and draft
// headers. Default headers.DefaultPolicy.
func WithPolicyName(name string) Option {
	return func(c *config) {
		c.require(headers.CheckPolicyName(name) == nil, headers.ErrPolicyName.Error())
		c.policy = name
	}
}

// WithHeaders sends rate-limit fields as response header metadata from
// server interceptors (lower-case names: ratelimit-policy, ratelimit,
// retry-after...). Default headers.None: metadata costs an allocation
// per call.
func WithHeaders(style headers.Style) Option {
	return func(c *config) { c.headers = style }
}
