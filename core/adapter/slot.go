package adapter

import "time"

// slotRetryAfter is the Retry-After of a request refused for want of an
// in-flight slot: when one frees cannot be foreseen, and a second is
// longer than most requests hold one.
const slotRetryAfter = time.Second

// holdSlot takes an in-flight slot for r, which the limits admitted
// (Settings.InFlight). Refused, r is denied: its tokens go back, since it
// never runs, and its Decision says to retry after slotRetryAfter.
func (g *Gate) holdSlot(r *Request) bool {
	key := ""
	if g.perKey {
		key = r.Key(0)
	}
	release, ok := g.inFlight.TryAcquire(key)
	if ok {
		r.release = release
		return true
	}
	g.GiveBack(r)
	r.d.Allowed, r.d.Shadowed, r.d.Remaining = false, false, 0
	r.d.RetryAfter = max(r.d.RetryAfter, slotRetryAfter)
	return false
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
