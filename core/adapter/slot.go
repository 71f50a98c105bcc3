package adapter

import (
	"time"

	"github.com/pedreviljoen/gopherpace/core/headers"
)

// slotRetryAfter is the Retry-After of a request refused for want of an
// in-flight slot: when one frees cannot be foreseen, and a second is
// longer than most requests hold one.
const slotRetryAfter = time.Second

// holdSlot takes an in-flight slot for r, which the limits admitted
// (Settings.InFlight). Refused, r is denied: its tokens go back, since it
// never runs, and its Decision says to retry after slotRetryAfter.
func (g *Gate) holdSlot(r *Request) bool {
	release, ok := g.inFlight.TryAcquire(g.slotKey(r))
	r.slotAsked = true
	if ok {
		r.release = release
		return true
	}
	g.GiveBack(r)
	r.d.Allowed, r.d.Shadowed, r.d.Remaining = false, false, 0
	r.d.RetryAfter = max(r.d.RetryAfter, slotRetryAfter)
	return false
}

// slotKey is the in-flight key of r: its own with per-key slots, else the
// keyless limit's.
func (g *Gate) slotKey(r *Request) string {
	if g.perKey {
		return r.Key(0)
	}
	return ""
}

// slotsFree is how many of r's slots are free, as this node knows the
// cluster's count.
func (g *Gate) slotsFree(r *Request) int64 {
	_, cluster := g.inFlight.Count(g.slotKey(r))
	return max(0, g.inFlight.Limit()-cluster)
}

// addSlots adds the gate's in-flight limit to r's draft fields in f, if
// its style has them: none free for a request refused a slot, else those
// free now (the request's own taken, if it holds one).
func (g *Gate) addSlots(f *Fields, r *Request) {
	if g.style != headers.Draft && g.style != headers.Both {
		return
	}
	free := int64(0)
	if !r.slotAsked || r.release != nil {
		free = g.slotsFree(r)
	}
	f.f.AddSlots(g.inFlight.Limit(), free)
}

// HoldsSlot reports whether r holds an in-flight slot (WithConcurrency):
// the adapter calls Done when its handler returns, panics included.
func (r *Request) HoldsSlot() bool { return r.release != nil }

// Done gives back r's in-flight slot, if it holds one; again, nothing.
func (r *Request) Done() {
	if r.release != nil {
		r.release()
		r.release = nil
	}
}
