// Package adapter is the half of every gopherpace framework adapter that
// does not depend on the framework: the settings they share, their
// defaults and checks, the decision, the response fields and what each
// error answers. The httplimit package and the Gin, Echo, Fiber and gRPC
// adapters are built on it, so they behave alike; docs/adapters.md has the
// contract as a table, and package conformance tests it.
//
// Applications use an adapter, which re-exports what they need of this
// package (RefundFailed, RefundServerErrors); this package is for writing
// an adapter.
package adapter

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/clientip"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// ErrMissingKey is what a key function returns for a request that lacks
// the value it keys on (a header, say). Adapters answer it as a client
// error (400, or InvalidArgument over gRPC), and it spends nothing.
var ErrMissingKey = errors.New("gopherpace: request has no rate-limit key")

// MissingKey is ErrMissingKey naming what was looked for ("the X-Api-Key
// header"), so that the 400 tells the client what to send; errors.Is
// still finds ErrMissingKey. Key functions build it once, not per request.
func MissingKey(what string) error { return fmt.Errorf("%w: %s is missing", ErrMissingKey, what) }

// Settings are the options every adapter has, whatever its framework. The
// zero Settings are the defaults: client keys from the connection's
// address (no trusted proxies, IPv6 grouped by /64), the draft fields for
// the policy "default", no refunds, and the Decision kept from handlers.
type Settings struct {
	// ClientIP is where client addresses come from, for the default key.
	ClientIP clientip.Config
	// Headers selects the rate-limit fields; Retry-After goes out on every
	// denial whatever the style.
	Headers headers.Style
	// Policy names the policy in the draft fields (and in gRPC's
	// QuotaFailure); "" is headers.DefaultPolicy.
	Policy string
	// Refund, if set, reports whether a response with this status gives
	// its tokens back (see RefundFailed).
	Refund func(status int) bool
	// DecisionInContext makes each request's Decision available to the
	// handlers after the limiter.
	DecisionInContext bool
	// Also are further limits every request must pass too, all or nothing
	// (see Request); at most MaxLimits-1.
	Also []Part
	// MaxDelay shapes instead of refusing: a request whose tokens refill
	// brings within it waits for them (Gate.Shape); 0 refuses at once.
	MaxDelay time.Duration
	// MaxQueue caps the requests waiting at once; 0 is no cap beyond what
	// MaxDelay allows (the rate times MaxDelay).
	MaxQueue int
	// InFlight, if set, caps the requests in flight (slot.go): a request
	// the limits admit also takes one of its slots, for as long as its
	// handler runs: one of the keyless limit's, or with InFlightPerKey
	// one of its key's (Request.Key(0)).
	InFlight       *gopherpace.InFlight
	InFlightPerKey bool
}

// A Part is a further limit a request must pass too, with its policy's
// name for the draft fields.
type Part struct {
	Limiter *gopherpace.Limiter
	Policy  string
}

// MaxLimits is the most limits one middleware combines: its own and up to
// three more.
const MaxLimits = 4

// RefundFailed gives back the tokens of responses with status 400 or
// above: only requests that succeed count.
func RefundFailed(status int) bool { return status >= 400 }

// RefundServerErrors gives back the tokens of responses with status 500
// or above, so that a failing backend does not also cost clients their
// quota.
func RefundServerErrors(status int) bool { return status >= 500 }

// A Gate is an adapter's limiter with its settings checked and its fields
// prepared. It is immutable and safe for concurrent use.
type Gate struct {
	l        *gopherpace.Limiter
	limits   *gopherpace.Limits // with Also: every limit, the gate's own first
	ip       clientip.Config
	policy   render.Policy
	policies []render.Policy // every limit's, with Also
	names    []string        // and their names
	style    headers.Style
	name     string
	refund   func(int) bool
	inCtx    bool
	absolute bool // the fields state an absolute time (X-RateLimit-Reset)
	shaper        // MaxDelay and MaxQueue (shape.go)
	inFlight *gopherpace.InFlight
	perKey   bool // the slots are per key (Settings.InFlightPerKey)
}

// New checks s and returns the Gate for l. Its errors say what is wrong
// without a package prefix: adapters add their own.
func New(l *gopherpace.Limiter, s Settings) (*Gate, error) {
	if l == nil {
		return nil, errors.New("nil Limiter")
	}
	if err := s.ClientIP.Check(); err != nil {
		return nil, err
	}
	if s.Headers > headers.None {
		return nil, errors.New("unknown header style")
	}
	name := s.Policy
	if name == "" {
		name = headers.DefaultPolicy
	}
	if err := headers.CheckPolicyName(name); err != nil {
		return nil, err
	}
	sh, err := newShaper(s)
	if err != nil {
		return nil, err
	}
	g := &Gate{shaper: sh,
		l: l, ip: s.ClientIP, policy: render.NewPolicy(render.Style(s.Headers), name), style: s.Headers,
		name: name, refund: s.Refund, inCtx: s.DecisionInContext, inFlight: s.InFlight, perKey: s.InFlightPerKey,
		absolute: s.Headers == headers.Legacy || s.Headers == headers.Both,
	}
	if len(s.Also) > 0 {
		if len(s.Also) >= MaxLimits {
			return nil, fmt.Errorf("at most %d further limits, got %d", MaxLimits-1, len(s.Also))
		}
		limiters := []*gopherpace.Limiter{l}
		g.policies, g.names = []render.Policy{g.policy}, []string{name}
		for _, p := range s.Also {
			if err := headers.CheckPolicyName(p.Policy); err != nil {
				return nil, fmt.Errorf("further limit (WithAlso): %w", err)
			}
			// In the words of the option used: Combine would say "limiter 1
			// is given twice" to someone who never called it.
			for j, seen := range limiters {
				if p.Limiter != seen {
					continue
				}
				if j == 0 {
					return nil, fmt.Errorf("WithAlso(%q) is given the middleware's own limiter: a further limit needs a limiter of its own", p.Policy)
				}
				return nil, fmt.Errorf("WithAlso(%q) is given the same limiter as WithAlso(%q): give each further limit its own limiter", p.Policy, s.Also[j-1].Policy)
			}
			limiters = append(limiters, p.Limiter)
			g.policies = append(g.policies, render.NewPolicy(render.Style(s.Headers), p.Policy))
			g.names = append(g.names, p.Policy)
		}
		ls, err := gopherpace.Combine(limiters...)
		if err != nil {
			return nil, fmt.Errorf("WithAlso: %w", err)
		}
		g.limits = ls
	}
	if g.inFlight != nil {
		names := g.names
		if names == nil {
			names = []string{name}
		}
		// The draft fields name the in-flight limit beside the rates.
		if slices.Contains(names, render.SlotPolicyName) {
			return nil, fmt.Errorf("policy name %q is the in-flight limit's (WithConcurrency): name the rate otherwise", render.SlotPolicyName)
		}
	}
	return g, nil
}

// Limits is how many limits a request passes: one key each (Request.Keys).
func (g *Gate) Limits() int {
	if g.limits == nil {
		return 1
	}
	return len(g.policies)
}

// Limiter is the gate's limiter.
func (g *Gate) Limiter() *gopherpace.Limiter { return g.l }

// PolicyName is the policy's name as the fields send it.
func (g *Gate) PolicyName() string { return g.name }

// DecisionInContext reports whether handlers are to see the Decision.
func (g *Gate) DecisionInContext() bool { return g.inCtx }

// Refunds reports whether the gate refunds any response: an adapter must
// then keep the key and cost until the response is known.
func (g *Gate) Refunds() bool { return g.refund != nil }

// HasFields reports whether the request's decision gets any response
// fields: every denial does (Retry-After), an admit only unless the style
// is headers.None.
func (g *Gate) HasFields(r *Request) bool {
	return !r.d.Allowed || g.AdmitsHaveFields()
}

// AdmitsHaveFields reports whether an admitted request gets response
// fields: unless the style is headers.None.
func (g *Gate) AdmitsHaveFields() bool { return g.style != headers.None }

// Fields holds one response's fields: for frameworks whose headers are
// not an http.Header. Declare it on the stack and fill it with
// Gate.RenderRequest; values sent before cost no allocation.
type Fields struct{ f render.Fields }

// Len is the number of fields.
func (f *Fields) Len() int { return f.f.Len() }

// Name is field i's canonical name ("Ratelimit-Policy").
func (f *Fields) Name(i int) string { return f.f.Name(i) }

// Value is field i's value. It is shared with other responses: a
// framework may keep it, and must never write into its bytes.
func (f *Fields) Value(i int) string { return f.f.Value(i) }

// Status is the HTTP status that answers an error from a key function or
// from Take: 400 Bad Request for what the request itself got wrong (no
// key, a cost below 1 or above the bucket size), 500 for the rest (a peer
// address that is not IP, which is the server's setup).
func Status(err error) int {
	if ClientFault(err) {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// ClientFault reports whether err is the request's fault: no key, or a
// cost the bucket can never grant. Retrying the same request cannot help.
func ClientFault(err error) bool {
	return errors.Is(err, ErrMissingKey) || errors.Is(err, gopherpace.ErrInvalidCost) || errors.Is(err, gopherpace.ErrCostExceedsLimit)
}
