package adapter

import (
	"net/http"
	"time"

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
	at   time.Time
	all  [MaxLimits]gopherpace.Decision // each limit's, with Also
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
		r.d, r.at, err = g.l.TakeTimed(r.Keys[0], r.Cost)
		return err
	}
	n := len(g.policies)
	r.d, r.at, err = g.limits.TakeAll(r.Keys[:n], r.Cost, r.all[:n])
	return err
}

// SetHeaders writes the request's fields into h, replacing earlier values:
// with further limits, the draft fields list every policy. One allocation.
func (g *Gate) SetHeaders(h http.Header, r *Request) {
	if g.limits == nil {
		g.policy.SetHeader(h, render.Quota(r.d), r.at)
		return
	}
	var f Fields
	g.RenderRequest(&f, r)
	f.f.SetHeader(h)
}

// RenderRequest renders the request's fields into f, as SetHeaders writes
// them.
func (g *Gate) RenderRequest(f *Fields, r *Request) {
	if g.limits == nil {
		f.f.Render(g.policy, render.Quota(r.d), r.at)
		return
	}
	n := len(g.policies)
	var qs [MaxLimits]render.Quota
	for i := range n {
		qs[i] = render.Quota(r.all[i])
	}
	f.f.RenderMany(g.policies, qs[:n], render.Quota(r.d), r.at)
}

// Settle gives the request's tokens back, to every limit, when the gate
// refunds responses with this status (Settings.Refund).
func (g *Gate) Settle(r *Request, status int) {
	if g.refund != nil && g.refund(status) {
		g.GiveBack(r)
	}
}

// GiveBack gives the request's tokens back to every limit, whatever the
// status: for adapters that decide refunds their own way (gRPC codes). A
// request that was denied or let through in shadow mode spent nothing,
// and gets nothing back.
func (g *Gate) GiveBack(r *Request) {
	if !r.d.Allowed || r.d.Shadowed {
		return
	}
	if g.limits == nil {
		g.l.Refund(r.Keys[0], r.Cost)
		return
	}
	g.limits.Refund(r.Keys[:len(g.policies)], r.Cost)
}
