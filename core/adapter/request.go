package adapter

import (
	"net/http"
	"time"
	"unsafe"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// A Request is one request's decision, kept on the adapter's stack: the
// adapter fills Keys and Cost, Decide spends, and the fields, the Decision
// and any refund come from it. With further limits (Settings.Also) it
// decides them all together: a request one limit denies spends from none.
type Request struct {
	// Keys are the buckets: Keys[0] of the gate's own limiter, Keys[i] of
	// the i-th further limit. Gate.Limits says how many are used.
	Keys [MaxLimits]string
	// Cost is the tokens the request spends from each limit.
	Cost int64
	d    gopherpace.Decision
	at   time.Time                      // when it was decided, for fields that state an absolute time
	all  [MaxLimits]gopherpace.Decision // each limit's, with Also
	err  error
	back bool // its tokens were given back (RefundFor, GiveBack)
	// release gives back its in-flight slot (slot.go); slotAsked says it
	// asked for one, so that without release it was refused.
	release   func()
	slotAsked bool
	// A client key a Flow built is kept in buf, not in Keys: a string
	// converted from bytes on the stack would move to the heap once stored
	// through a pointer. Bit i of own says Keys[i] is that key. Key reads
	// it from the Request's own buf every time, so a copied Request stays
	// whole; the limiter never keeps a key it is given (buckets are found
	// by the key's hash).
	own uint8
	n   uint8
	buf [keyBytes]byte
}

// keyBytes holds the longest client key: an IPv6 prefix, "/128" included.
const keyBytes = 64

// Key is the bucket key of limit i (0: the gate's own).
func (r *Request) Key(i int) string {
	if r.own&(1<<i) != 0 {
		return unsafe.String(&r.buf[0], int(r.n))
	}
	return r.Keys[i]
}

// Err is why the flow failed the request (Step Fail).
func (r *Request) Err() error { return r.err }

func (r *Request) fail(err error) Step {
	r.err = err
	return Fail
}

// ownKey makes b, appended to r.buf[:0], the request's first key, kept
// in r's own buffer (a key too long for it is copied).
func (r *Request) ownKey(b []byte) {
	if len(b) == 0 || len(b) > len(r.buf) || &b[0] != &r.buf[0] {
		r.Keys[0] = string(b)
		return
	}
	r.n, r.own = uint8(len(b)), r.own|1
}

// Decision is the request's decision: with further limits, the one
// closest to exhaustion (see gopherpace.Limits).
func (r *Request) Decision() gopherpace.Decision { return r.d }

// DeniedBy is the name of the policy that denied the request: the gate's
// own, or, with further limits, the first that denied.
func (g *Gate) DeniedBy(r *Request) string {
	if g.limits != nil {
		for i, d := range r.all[:len(g.policies)] {
			if !d.Allowed {
				return g.names[i]
			}
		}
	}
	return g.name
}

// Decide spends r.Cost from every limit now, or from none, waiting out
// holds as Limiter.Take does. Its errors are the limiters' cost errors.
func (g *Gate) Decide(r *Request) error {
	var err error
	if g.limits == nil {
		if g.absolute {
			r.d, r.at, err = g.l.TakeTimed(r.Key(0), r.Cost)
		} else {
			r.d, err = g.l.Take(r.Key(0), r.Cost)
		}
		return err
	}
	n := len(g.policies)
	keys := r.keys(n)
	r.d, r.at, err = g.limits.TakeAll(keys[:n], r.Cost, r.all[:n])
	return err
}

// SetHeaders writes the request's fields into h, replacing earlier values:
// with further limits, the draft fields list every policy. Values sent
// before, and their []string, are shared (see headers.Renderer.Set): no
// allocation, but for the draft values of several policies (two), or of
// an in-flight limit beside the rates (three: render.Fields.AddSlots).
func (g *Gate) SetHeaders(h http.Header, r *Request) {
	if g.limits == nil && g.inFlight == nil {
		if !g.policy.SetAdmitted(h, (*render.Decision)(&r.d)) {
			g.policy.SetHeader(h, render.Decision(r.d), r.at)
		}
		return
	}
	var f Fields
	g.RenderRequest(&f, r)
	f.f.SetHeader(h)
}

// AdmittedDraft is an admitted request's two draft fields, RateLimit-Policy
// and RateLimit, when those are all its fields (the default style, one
// limit); ok is false otherwise (render it with RenderRequest).
func (g *Gate) AdmittedDraft(r *Request) (policy, limit string, ok bool) {
	if g.limits != nil || g.inFlight != nil || g.policy.Style != render.Draft || !r.d.Allowed {
		return "", "", false
	}
	policy, limit = g.policy.DraftTexts((*render.Decision)(&r.d))
	return policy, limit, true
}

// RenderRequest renders the request's fields into f, as SetHeaders writes
// them.
func (g *Gate) RenderRequest(f *Fields, r *Request) {
	switch {
	case g.limits != nil:
		n := len(g.policies)
		var qs [MaxLimits]render.Decision
		for i := range n {
			qs[i] = render.Decision(r.all[i])
		}
		f.f.RenderMany(g.policies, qs[:n], render.Decision(r.d), r.at)
	case !f.f.RenderAdmitted(&g.policy, (*render.Decision)(&r.d)):
		f.f.Render(g.policy, render.Decision(r.d), r.at)
	}
	if g.inFlight != nil {
		g.addSlots(f, r)
	}
}

// RefundFor gives the request's tokens back, to every limit, when the gate
// refunds responses with this status (Settings.Refund).
func (g *Gate) RefundFor(r *Request, status int) {
	if g.refund != nil && g.refund(status) {
		g.GiveBack(r)
	}
}

// GiveBack gives the request's tokens back to every limit, whatever the
// status: for adapters that decide refunds their own way (gRPC codes). A
// request that was denied or let through in shadow mode spent nothing,
// and gets nothing back.
func (g *Gate) GiveBack(r *Request) {
	if !r.d.Allowed || r.d.Shadowed || r.back {
		return
	}
	r.back = true
	if g.limits == nil {
		g.l.Refund(r.Key(0), r.Cost)
		return
	}
	n := len(g.policies)
	keys := r.keys(n)
	g.limits.Refund(keys[:n], r.Cost)
}

// keys are the first n keys, as Key reads them.
func (r *Request) keys(n int) (ks [MaxLimits]string) {
	for i := range n {
		ks[i] = r.Key(i)
	}
	return ks
}

// Settle charges an admitted request what it used, measured after its
// handler (an LLM answer's tokens, bytes sent), to the gate's own limit:
// used beyond the Cost it was admitted with is charged, into debt that
// refill repays before the key is admitted again, at most one bucket
// beyond empty (Limiter.Charge); used below it is given back. A request denied, let through in shadow mode,
// or whose tokens were given back already settles nothing. With further
// limits (Settings.Also), they keep the Cost.
func (g *Gate) Settle(r *Request, used int64) {
	if !r.d.Allowed || r.d.Shadowed || r.back {
		return
	}
	switch key := r.Key(0); {
	case used > r.Cost:
		_, _ = g.l.Charge(key, used-r.Cost) // a charge the debt cap cuts is the most a key owes
	case used < r.Cost:
		_ = g.l.Refund(key, r.Cost-max(used, 0))
	}
}
