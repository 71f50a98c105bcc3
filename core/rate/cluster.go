package rate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// An Option configures a Limiter.
type Option func(*config)

type config struct {
	clustered bool
	transport gopherpace.Transport
	opts      []gopherpace.Option
}

// Clustered makes the Limiter's bucket the cluster's: every process that
// builds one with the same limiter ID (gopherpace.WithLimiterID) over t
// spends from one bucket, through a gopherpace Limiter (see its package
// for the transport, memberlist's in the memberpace module). opts
// configure that Limiter (its ID, logger, partition policy, ...); the
// rate and bucket size come from NewLimiter's r and b.
//
// A clustered Limiter gossips in goroutines of its own until Close. It
// differs from a standalone one in four ways. ReserveN and WaitN book at
// most one window (the burst at the limit) ahead; a booking further off
// is not OK, and WaitN fails at once. CancelAt gives a booking's tokens
// back whole if its time to act has not passed, to this node's replica,
// and to the cluster only while the booking is not yet reported: peers
// never add tokens on a frame's say-so. Fractions of a token are not shared, so TokensAt reads
// whole tokens (or the debt). A zero limit allows nothing, not even the
// tokens the bucket held.
func Clustered(t gopherpace.Transport, opts ...gopherpace.Option) Option {
	return func(c *config) { c.clustered, c.transport, c.opts = true, t, opts }
}

func buildCluster(r Limit, b int, c config) (*gopherpace.Limiter, error) {
	if c.transport == nil {
		return nil, errors.New("rate: Clustered needs a transport")
	}
	tokens, per, size := clusterRule(r, b)
	return gopherpace.New(append([]gopherpace.Option{
		gopherpace.WithTransport(c.transport), gopherpace.WithRate(tokens, per), gopherpace.WithBucketSize(size),
	}, c.opts...)...)
}

// clusterRule is the gopherpace rule for limit r and burst b: whole
// tokens a second where r is a whole number, else one token per interval.
// A limit the rule cannot hold (Inf, none, a burst below one) is decided
// by this package without the cluster, and leaves a placeholder rule.
func clusterRule(r Limit, b int) (tokens int64, per time.Duration, size int64) {
	size = int64(max(b, 1))
	switch iv := intervalOf(r); {
	case iv <= 0:
		return 1, time.Second, size
	case r >= 1 && r <= 1e9 && float64(r) == math.Trunc(float64(r)):
		return int64(r), time.Second, size
	default:
		return 1, time.Duration(iv), size
	}
}

// clusterVerdict is how a clustered Limiter decides n tokens without
// asking the cluster: every event under Inf; none for a limit that
// refills nothing or a burst below one (n of zero or less aside); none
// above the burst; ask is set when the cluster decides.
func (lim *Limiter) clusterVerdict(n int) (ok, ask bool) {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	switch iv := intervalOf(lim.limit); {
	case iv == 0:
		return true, false
	case n > lim.burst:
		return false, false
	case n <= 0:
		return true, true
	case iv == never || lim.burst < 1:
		return false, false
	}
	return false, true
}

func (lim *Limiter) clusterAllow(t time.Time, n int, realClock bool) bool {
	ok, ask := lim.clusterVerdict(n)
	if !ask {
		return ok
	}
	if n <= 0 { // allowed unless the bucket is in debt
		owed, err := lim.cluster.ChargeAt(t, "", 0)
		return err == nil && owed == 0
	}
	var d gopherpace.Decision
	var err error
	if realClock {
		d, err = lim.cluster.Take("", int64(n))
	} else {
		d, err = lim.cluster.TakeAt(t, "", int64(n))
	}
	return err == nil && d.Allowed
}

// clusterReserve books the tokens on the cluster's bucket (gopherpace's
// ReserveAt): at most one window ahead, and counted against this node's
// cap of unreported admits, so that bookings made on several nodes at
// once keep the bound the cluster's admits keep.
func (lim *Limiter) clusterReserve(t time.Time, n int, maxFuture time.Duration) Reservation {
	no := Reservation{lim: lim, limit: lim.Limit()}
	ok, ask := lim.clusterVerdict(n)
	switch {
	case !ask && ok, ask && n <= 0:
		return Reservation{ok: true, lim: lim, tokens: max(n, 0), timeToAct: t, limit: no.limit}
	case !ask:
		return no
	}
	wait, ok, err := lim.cluster.ReserveAt(t, "", int64(n), maxFuture)
	if err != nil || !ok || wait > maxFuture {
		if err == nil && ok {
			_ = lim.cluster.RefundAt(t, "", int64(n))
		}
		return no
	}
	return Reservation{ok: true, lim: lim, tokens: n, timeToAct: t.Add(wait), limit: no.limit}
}

func (lim *Limiter) clusterCancel(r *Reservation, t time.Time) {
	if r.timeToAct.Before(t) || intervalOf(lim.Limit()) == 0 {
		return
	}
	_ = lim.cluster.RefundAt(t, "", int64(r.tokens))
}

func (lim *Limiter) clusterWait(ctx context.Context, n int) error {
	ok, ask := lim.clusterVerdict(n)
	if !ask {
		if ok {
			return nil
		}
		return fmt.Errorf("rate: WaitN(%d): the limit refills nothing", n)
	}
	if n <= 0 {
		return nil
	}
	within := InfDuration
	if deadline, ok := ctx.Deadline(); ok {
		within = time.Until(deadline)
	}
	wait, ok, err := lim.cluster.Reserve("", int64(n), within)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("rate: WaitN(%d) would wait past the context's deadline, or more than a window", n)
	case wait == 0:
		return nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		_ = lim.cluster.Refund("", int64(n)) // others may use what it booked
		return ctx.Err()
	}
}

// clusterTokens reads this node's replica: whole tokens, or the debt as
// negative tokens.
func (lim *Limiter) clusterTokens(t time.Time) float64 {
	lim.mu.Lock()
	limit, burst := lim.limit, lim.burst
	lim.mu.Unlock()
	switch iv := intervalOf(limit); {
	case iv == 0:
		return float64(burst)
	case iv == never || burst < 1:
		return 0
	}
	if owed, err := lim.cluster.ChargeAt(t, "", 0); err == nil && owed > 0 {
		tokens, per, _ := clusterRule(limit, burst)
		return -float64(owed) * float64(tokens) / float64(per)
	}
	return float64(lim.cluster.PeekAt(t, "").Remaining)
}

// syncCluster gives a clustered Limiter's rule the limit and burst just
// set. The caller holds mu. A limit or burst the rule cannot hold is
// decided without the cluster (clusterVerdict) and keeps the rule.
func (lim *Limiter) syncCluster() {
	if lim.cluster == nil || intervalOf(lim.limit) <= 0 || lim.burst < 1 {
		return
	}
	tokens, per, size := clusterRule(lim.limit, lim.burst)
	if err := lim.cluster.SetRate(tokens, per, size); err != nil {
		// A rule gopherpace refuses (a window over its cap) must not
		// leave the old, looser rule in force.
		lim.limit = 0
	}
}
