package rate

import "time"

// A Reservation is tokens booked for events that may happen after a
// delay. It may be cancelled, which gives back what it still can.
type Reservation struct {
	ok        bool
	lim       *Limiter
	tokens    int
	timeToAct time.Time
	act       int64 // timeToAct in the bucket's ns; standalone
	interval  int64 // the bucket's ns per token when booked; standalone
	limit     Limit // the limit when booked
}

// OK reports whether the tokens were booked: false for more than the
// burst, or, for Wait, tokens due after the context's deadline. A
// Reservation that is not OK booked nothing.
func (r *Reservation) OK() bool { return r.ok }

// Delay is DelayFrom(time.Now()).
func (r *Reservation) Delay() time.Duration { return r.DelayFrom(time.Now()) }

// DelayFrom is how long from t the holder must wait before acting: zero
// when it may act at once, InfDuration when the Reservation is not OK.
func (r *Reservation) DelayFrom(t time.Time) time.Duration {
	if !r.ok {
		return InfDuration
	}
	return max(r.timeToAct.Sub(t), 0)
}

// Cancel is CancelAt(time.Now()).
func (r *Reservation) Cancel() { r.CancelAt(time.Now()) }

// CancelAt says at t that the holder will not act, and gives back the
// tokens the Reservation still holds: none once its time to act has
// passed, and, standalone, its tokens less those booked after it (they
// were booked as if these were spent). The bucket is never filled past
// full. Clustered, it gives back all its tokens if its time to act has
// not passed.
func (r *Reservation) CancelAt(t time.Time) {
	if !r.ok || r.tokens <= 0 {
		return
	}
	if r.lim.cluster != nil {
		r.lim.clusterCancel(r, t)
		return
	}
	lim := r.lim
	lim.mu.Lock()
	defer lim.mu.Unlock()
	lim.b.cancel(lim.b.nanos(t), r.tokens, r.act, r.interval, lim.burst)
}

// Reserve is ReserveN(time.Now(), 1).
func (lim *Limiter) Reserve() *Reservation { return lim.ReserveN(time.Now(), 1) }

// ReserveN books n tokens at t and returns when they are due: the holder
// waits DelayFrom(t) and acts, or cancels. It is not OK for n above the
// burst (unless the limit is Inf), nor, where the limit refills nothing,
// for tokens that will never come. Clustered, it books at most one window
// ahead (see Clustered).
//
//	r := lim.ReserveN(time.Now(), 1)
//	if !r.OK() {
//		return // n exceeds the burst
//	}
//	time.Sleep(r.Delay())
//	act()
//
// For a deadline or a cancellation, use Wait; to drop what exceeds the
// limit, Allow.
func (lim *Limiter) ReserveN(t time.Time, n int) *Reservation {
	r := lim.reserve(t, n, InfDuration)
	return &r
}

// reserve books n tokens at t due within maxFuture.
func (lim *Limiter) reserve(t time.Time, n int, maxFuture time.Duration) Reservation {
	if lim.cluster != nil {
		return lim.clusterReserve(t, n, maxFuture)
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	lim.ready()
	act, ok := lim.b.reserve(lim.b.nanos(t), n, lim.burst, maxFuture)
	if !ok {
		return Reservation{lim: lim, limit: lim.limit}
	}
	return Reservation{ok: true, lim: lim, tokens: n, timeToAct: lim.b.timeOf(act), act: act,
		interval: lim.b.interval, limit: lim.limit}
}
