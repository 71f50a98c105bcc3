package rate

import (
	"sync"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// A Limiter is a token bucket of size burst, full at first and refilled
// at limit tokens a second: over any long enough span it allows limit
// events a second, in bursts of at most burst. With Inf it allows every
// event and ignores burst.
//
// Standalone (the default), the bucket is this Limiter's. Given Clustered,
// it is the cluster's: every process holding a Limiter with the same
// limiter ID over the same transport spends from one bucket.
//
// Each method spends one token, or n for its ...N form, and they differ
// when the tokens are not there: Allow says no, Reserve books tokens
// ahead and says how long to wait for them, and Wait waits.
//
// The zero Limiter is valid and rejects every event; NewLimiter makes the
// useful ones. A Limiter is safe for concurrent use.
type Limiter struct {
	mu      sync.Mutex
	limit   Limit
	burst   int
	b       bucket              // standalone
	cluster *gopherpace.Limiter // clustered; nil standalone
}

// NewLimiter returns a Limiter that allows r events a second in bursts of
// up to b. It panics on an option that Build would refuse; only Clustered
// can be refused.
func NewLimiter(r Limit, b int, opts ...Option) *Limiter {
	l, err := Build(r, b, opts...)
	if err != nil {
		panic(err)
	}
	return l
}

// Build is NewLimiter returning an error where NewLimiter panics.
func Build(r Limit, b int, opts ...Option) (*Limiter, error) {
	l := &Limiter{limit: r, burst: b}
	l.b.setUp(r, b, true)
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.clustered {
		shared, err := buildCluster(r, b, c)
		if err != nil {
			return nil, err
		}
		l.cluster = shared
	}
	return l, nil
}

// Close stops a clustered Limiter's gossip and says goodbye to its peers;
// its methods then decide on its last view alone. A standalone Limiter
// holds nothing to close: Close does nothing, and need not be called.
func (lim *Limiter) Close() error {
	if lim.cluster == nil {
		return nil
	}
	return lim.cluster.Close()
}

// Cluster is the gopherpace Limiter behind a clustered Limiter, for its
// Stats, Peers and the metrics exporters; nil standalone.
func (lim *Limiter) Cluster() *gopherpace.Limiter { return lim.cluster }

// Limit is the rate in events per second.
func (lim *Limiter) Limit() Limit {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	return lim.limit
}

// Burst is the most tokens one call can spend, and the most the bucket
// holds. A zero Burst allows no event unless the limit is Inf.
func (lim *Limiter) Burst() int {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	return lim.burst
}

// Tokens is TokensAt(time.Now()).
func (lim *Limiter) Tokens() float64 { return lim.TokensAt(time.Now()) }

// TokensAt is how many tokens the bucket holds at t: fractional, and
// negative while reservations are booked ahead of the refill. Clustered,
// it reads this node's replica of the cluster's bucket.
func (lim *Limiter) TokensAt(t time.Time) float64 {
	if lim.cluster != nil {
		return lim.clusterTokens(t)
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	lim.ready()
	return lim.b.tokens(lim.b.nanos(t), lim.burst)
}

// Allow is AllowN(time.Now(), 1). Clustered, it waits out the few
// milliseconds a node's report to its peers may take before it answers
// (gopherpace's Limiter.Allow says when).
func (lim *Limiter) Allow() bool {
	if lim.cluster != nil {
		return lim.clusterAllow(time.Now(), 1, true)
	}
	return lim.AllowN(time.Now(), 1)
}

// AllowN reports whether n events may happen at t, spending their tokens
// if so. For events that are dropped when over the limit; to delay them
// instead, use Reserve or Wait. n of zero or less spends nothing and is
// allowed unless reservations are booked ahead of the refill.
func (lim *Limiter) AllowN(t time.Time, n int) bool {
	if lim.cluster != nil {
		return lim.clusterAllow(t, n, false)
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	lim.ready()
	_, ok := lim.b.reserve(lim.b.nanos(t), n, lim.burst, 0)
	return ok
}

// SetLimit is SetLimitAt(time.Now(), newLimit).
func (lim *Limiter) SetLimit(newLimit Limit) { lim.SetLimitAt(time.Now(), newLimit) }

// SetLimitAt changes the limit at t. The tokens the bucket holds at t are
// kept, and refill at the new limit from t. Clustered, it changes this
// node's rule: set the same on every node.
func (lim *Limiter) SetLimitAt(t time.Time, newLimit Limit) {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	lim.ready()
	lim.b.setLimit(lim.b.nanos(t), newLimit, lim.burst)
	lim.limit = newLimit
	lim.syncCluster()
}

// SetBurst is SetBurstAt(time.Now(), newBurst).
func (lim *Limiter) SetBurst(newBurst int) { lim.SetBurstAt(time.Now(), newBurst) }

// SetBurstAt changes the burst at t, keeping the tokens the bucket holds
// up to the new size. Clustered, it changes this node's rule: set the
// same on every node.
func (lim *Limiter) SetBurstAt(t time.Time, newBurst int) {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	lim.ready()
	lim.b.setBurst(lim.b.nanos(t), lim.burst, newBurst)
	lim.burst = newBurst
	lim.syncCluster()
}

// ready sets up the zero Limiter's bucket on its first use. The caller
// holds mu.
func (lim *Limiter) ready() {
	if !lim.b.ready {
		lim.b.setUp(lim.limit, lim.burst, false)
	}
}
