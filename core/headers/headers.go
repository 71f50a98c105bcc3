// Package headers renders gopherpace Decisions as HTTP response headers:
// Retry-After, the IETF httpapi draft fields RateLimit-Policy and RateLimit,
// and the legacy X-RateLimit-* fields. Framework adapters use it, and each
// re-exports its styles for WithHeaders (httplimit.LegacyHeaders,
// ginpace.NoHeaders...), so that an application need not import it; it is
// for rendering the fields yourself (SetHeader, Append).
package headers

import (
	"errors"
	"net/http"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// Style selects which rate-limit fields describe a Decision. Retry-After is
// sent on every denial whatever the style.
type Style uint8

const (
	// Draft sends the IETF draft fields RateLimit-Policy and RateLimit. It
	// is the zero value and the default: its times are deltas, so clients
	// need no synchronised clock.
	Draft Style = Style(render.Draft)
	// Legacy sends X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (Unix time in seconds, as GitHub's API does).
	Legacy Style = Style(render.Legacy)
	// Both sends the draft and the legacy fields.
	Both Style = Style(render.Both)
	// None sends no rate-limit fields (Retry-After still goes out on
	// denials).
	None Style = Style(render.None)
)

// Field names, canonical for net/http.
const (
	RetryAfter      = render.RetryAfter
	RateLimitPolicy = render.RateLimitPolicy
	RateLimit       = render.RateLimit
	XLimit          = render.XLimit
	XRemaining      = render.XRemaining
	XReset          = render.XReset
)

// DefaultPolicy names the policy in the draft fields when none is set.
const DefaultPolicy = render.DefaultName

// MaxFields is the most fields one Decision renders to: size a stack
// buffer with it, as in var buf [headers.MaxFields]headers.Field.
const MaxFields = render.MaxFields

// Field is one response header, for frameworks whose headers are not an
// http.Header.
type Field struct{ Name, Value string }

// ErrPolicyName is returned for a policy name that cannot be sent.
var ErrPolicyName = errors.New("policy name must be 1-64 printable ASCII characters")

// CheckPolicyName returns ErrPolicyName unless name can be sent as a draft
// policy name: 1 to 64 bytes of printable ASCII.
func CheckPolicyName(name string) error {
	if name == "" || !render.ValidName(name) {
		return ErrPolicyName
	}
	return nil
}

// Renderer renders Decisions in one style for one named policy. The zero
// value renders the draft fields for DefaultPolicy. A Renderer is
// immutable and safe for concurrent use.
type Renderer struct{ p render.Policy }

// New returns a Renderer for style and policy; an empty policy means
// DefaultPolicy. It fails on an unknown style or an invalid name.
func New(style Style, policy string) (Renderer, error) {
	if style > None {
		return Renderer{}, errors.New("unknown header style")
	}
	if policy == "" {
		policy = DefaultPolicy
	}
	if err := CheckPolicyName(policy); err != nil {
		return Renderer{}, err
	}
	return Renderer{render.NewPolicy(render.Style(style), policy)}, nil
}

// Style is the renderer's style.
func (r Renderer) Style() Style { return Style(r.p.Style) }

// Append appends d's fields to dst. now is read only for the legacy
// X-RateLimit-Reset, an absolute time: pass the time the decision was
// made at (as given to TakeAt), so a request reads the clock once. The
// renderer keeps the values it has rendered: values sent before cost no
// allocation.
func (r Renderer) Append(dst []Field, d gopherpace.Decision, now time.Time) []Field {
	return render.Append(dst, r.p, render.Decision(d), now)
}

// Set writes d's fields into h, replacing earlier values. The []string of
// each field is shared with every response that sends the same value, so
// that Set allocates nothing once a value was sent: change a field by
// replacing it (h.Set, h.Add, h.Del), never by writing into its slice.
func (r Renderer) Set(h http.Header, d gopherpace.Decision, now time.Time) {
	r.p.SetHeader(h, render.Decision(d), now)
}

// RetryAfterSeconds is the Retry-After delay-seconds for d: whole seconds
// rounded up, and at least 1 so that a client never retries at once.
func RetryAfterSeconds(d time.Duration) int64 { return render.RetryAfterSeconds(d) }

// WriteTooManyRequests answers a denied request: d's fields as r renders
// them, then 429 with a short text body.
func WriteTooManyRequests(w http.ResponseWriter, d gopherpace.Decision, r Renderer, now time.Time) {
	render.WriteTooManyRequests(w, r.p, render.Decision(d), now)
}
