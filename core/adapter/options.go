package adapter

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// An Option sets one of the Settings every adapter shares, or says why it
// cannot. Each adapter wraps these in its own option type under the same
// names (WithTrustedProxies, WithIPv6Prefix...), so that the checks and
// the defaults are written once.
type Option func(*Settings) error

// TrustedProxies trusts the forwarding fields of requests from these
// networks: the load balancers and proxies in front of the service.
// X-Forwarded-For is walked from the right, so a client cannot pick its
// own key by sending one.
func TrustedProxies(networks ...netip.Prefix) Option {
	return func(s *Settings) error {
		for _, p := range networks {
			if !p.IsValid() {
				return errors.New("invalid trusted proxy network")
			}
			s.ClientIP.TrustedProxies = append(s.ClientIP.TrustedProxies, p.Masked())
		}
		return nil
	}
}

// IPv6Prefix groups IPv6 clients by their first bits bits, 1 to 128; the
// default is clientip.DefaultIPv6Prefix (a /64).
func IPv6Prefix(bits int) Option {
	return func(s *Settings) error {
		if bits < 1 || bits > 128 {
			return errors.New("IPv6 prefix must be between 1 and 128 bits")
		}
		s.ClientIP.IPv6Prefix = bits
		return nil
	}
}

// Headers selects the rate-limit fields sent with every limited response.
func Headers(style headers.Style) Option {
	return func(s *Settings) error {
		if style > headers.None {
			return errors.New("unknown header style")
		}
		s.Headers = style
		return nil
	}
}

// PolicyName names the policy in the draft fields.
func PolicyName(name string) Option {
	return func(s *Settings) error {
		if err := headers.CheckPolicyName(name); err != nil {
			return err
		}
		s.Policy = name
		return nil
	}
}

// Refund gives back a request's tokens when when(status) reports true for
// its response's status (RefundFailed, RefundServerErrors, or your own).
func Refund(when func(status int) bool) Option {
	return func(s *Settings) error {
		if when == nil {
			return errors.New("nil refund func")
		}
		s.Refund = when
		return nil
	}
}

// Also adds a limit every request must pass too, all or nothing: a
// request either limit denies spends from neither. Its policy is named
// policy in the draft fields, which then list every policy, and the
// adapter supplies its key (Request.Keys): 100 an hour per API key beside
// the adapter's 10 a second per client, say. Up to MaxLimits in all.
func Also(l *gopherpace.Limiter, policy string) Option {
	return func(s *Settings) error {
		if l == nil {
			return errors.New("nil Limiter in a further limit (WithAlso)")
		}
		if err := headers.CheckPolicyName(policy); err != nil {
			return fmt.Errorf("further limit (WithAlso): %w", err)
		}
		s.Also = append(s.Also, Part{l, policy})
		return nil
	}
}

// MaxDelay shapes traffic instead of refusing it: a request whose tokens
// are due within d waits for them (Gate.Shape), in order of arrival, and
// only one due later is denied. One whose context ends while it waits
// gives its tokens back and is denied. d runs from a millisecond up, and
// acts as no more than the limiter books ahead (Limiter.Reserve):
// standalone, 30 s or the limiter's window (its bucket size at its rate)
// if longer; clustered, the window. It does not combine with Also.
func MaxDelay(d time.Duration) Option {
	return func(s *Settings) error {
		if d < time.Millisecond {
			return fmt.Errorf("the longest delay must be at least 1ms, got %v", d)
		}
		s.MaxDelay = d
		return nil
	}
}

// MaxQueue caps the requests that wait for their tokens at once (with
// MaxDelay): one more is denied as if its tokens were too far off.
func MaxQueue(n int) Option {
	return func(s *Settings) error {
		if n < 1 {
			return fmt.Errorf("the queue must hold at least 1 request, got %d", n)
		}
		s.MaxQueue = n
		return nil
	}
}

// Concurrency caps the requests in flight at once with f, across the
// cluster when f is clustered: a request the limits admit is denied
// (429, Retry-After: 1) while no slot is free, and its tokens go back;
// one let in holds a slot until its handler returns, a panic included.
func Concurrency(f *gopherpace.InFlight) Option {
	return func(s *Settings) error {
		if f == nil {
			return errors.New("nil in-flight limit: pass one, such as gopherpace.NewInFlight's")
		}
		s.InFlight = f
		return nil
	}
}

// ConcurrencyPerKey is Concurrency with f's slots per request key (the
// key of the middleware's own limit: the client's address by default),
// so that each client has at most f's limit in flight.
func ConcurrencyPerKey(f *gopherpace.InFlight) Option {
	set := Concurrency(f)
	return func(s *Settings) error {
		s.InFlightPerKey = true
		return set(s)
	}
}

// DecisionInContext makes each request's Decision available to the
// handlers after the limiter.
func DecisionInContext() Option {
	return func(s *Settings) error {
		s.DecisionInContext = true
		return nil
	}
}

// Configure applies opts to the default Settings and returns the Gate
// for l. problems are the adapter's own complaints about its options; every
// error, theirs and these, is reported at once, each starting with prefix
// (the adapter's package name).
func Configure(l *gopherpace.Limiter, prefix string, opts []Option, problems ...error) (*Gate, error) {
	var s Settings
	errs := make([]error, 0, len(problems))
	// Wrapped, not rebuilt from strings: errors.Is finds the sentinels
	// (headers.ErrPolicyName, say) through every adapter's constructor.
	for _, p := range problems {
		errs = append(errs, fmt.Errorf("%s: %w", prefix, p))
	}
	for _, o := range opts {
		if err := o(&s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", prefix, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	g, err := New(l, s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	return g, nil
}
