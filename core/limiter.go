package gopherpace

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter enforces one rate-limit policy: a refill rate and a bucket size,
// applied to one global bucket (key "") and to one bucket per non-empty key.
// Buckets are GCRA token buckets held in one atomic word each; deciding
// takes a few atomic operations and never allocates. While several cores
// call Allow at once, the global bucket hands its tokens out in
// small per-processor batches that expire after 1 ms, so the cores do not
// contend for its word; in any span t it still admits at most
// B + R·(t + 1ms).
//
// Standalone, the limit is this process's. Given a Transport (WithTransport)
// the limit is the cluster's: every node holds a replica of each bucket that
// refills at the full rate, and debits it with what its peers report they
// admitted.
//
// Time is a parameter of every ...At method. Times passed to one Limiter
// must come from one clock; time.Now() values are compared on their
// monotonic reading. Time that runs backwards never admits extra tokens.
//
// A Limiter is safe for concurrent use.
type Limiter struct {
	global    bucket
	epoch     time.Time
	pol       *policy
	keys      *store
	overrides map[uint64]*policy
	seed      uint64
	name      string
	log       *slog.Logger
	eng       *engine // nil when standalone
	leases    *leases // nil when the bucket is too small to lease
	closeOnce sync.Once
}

// New returns a Limiter configured by opts. WithRefillRate is required.
// Invalid options give an error; New never panics on configuration.
func New(opts ...Option) (*Limiter, error) {
	c := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, errorf("nil Option")
		}
		o(&c)
	}
	if err := c.finish(); err != nil {
		return nil, err
	}
	pol, err := newPolicy(c.rate, c.burst)
	if err != nil {
		return nil, err
	}
	l := &Limiter{
		epoch: time.Now(),
		pol:   pol,
		seed:  c.keySeed,
		name:  c.nodeName,
		log:   c.logger.With("component", "gopherpace"),
	}
	for _, o := range c.overrides {
		p, err := newPolicy(o.rate, o.burst)
		if err != nil {
			return nil, fmt.Errorf("override %q: %w", o.key, err)
		}
		if l.overrides == nil {
			l.overrides = make(map[uint64]*policy, len(c.overrides))
		}
		l.overrides[hashKey(l.seed, o.key)] = p
	}
	l.global.init()
	l.keys = newStore(c.maxKeys, c.transport != nil)
	if c.transport != nil {
		if pol.tolerance > maxClusteredTolerance {
			return nil, errorf("bucket size %d at %d/s spans more than %v of refill, the most a clustered limiter allows",
				pol.burst, pol.rate, time.Duration(maxClusteredTolerance))
		}
		// The clustered bucket holds the global state until Close hands it
		// back; meanwhile the standalone word stays marked.
		l.global.tat.Store(evicted)
		l.eng = newEngine(l, &c)
		l.eng.start()
	}
	l.leases = newLeases(pol)
	l.log.Debug("limiter created", "node", l.name, "rate", pol.rate, "burst", pol.burst, "clustered", l.eng != nil)
	return l, nil
}

// nanos converts a caller's time to nanoseconds since the limiter's epoch.
func (l *Limiter) nanos(now time.Time) int64 { return int64(now.Sub(l.epoch)) }

// Allow spends one token of the global bucket now. When the bucket is empty
// it returns false and how long until a token is available. A clustered
// limiter that is cut off from every peer under the fail-closed policy
// returns (false, 1s).
func (l *Limiter) Allow() (bool, time.Duration) {
	return l.allowNanos(int64(time.Since(l.epoch)))
}

// AllowAt is Allow at the given time.
func (l *Limiter) AllowAt(now time.Time) (bool, time.Duration) {
	return l.allowNanos(l.nanos(now))
}

func (l *Limiter) allowNanos(now int64) (bool, time.Duration) {
	if l.eng != nil {
		return l.allowClustered(now)
	}
	lz := l.leases
	// The global bucket is never evicted, so the lean path applies.
	if lz == nil {
		ok, retry, _ := allow(&l.global.tat, l.pol, now, 1)
		return ok, retry
	}
	if lz.hot(now) {
		return lz.allow(plainSource{&l.global.tat}, l.pol, now)
	}
	ok, retry, contended := allow(&l.global.tat, l.pol, now, 1)
	if contended {
		lz.lost(now)
	}
	if !ok {
		return l.stealOr(now, retry)
	}
	return true, 0
}

// stealInto is stealOr for a Decision of n tokens: only a one-token
// denial can be turned into an admit.
func (l *Limiter) stealInto(d *Decision, now, n int64) {
	if d.Allowed || n != 1 {
		return
	}
	if ok, _ := l.stealOr(now, 0); ok {
		d.Allowed, d.RetryAfter = true, 0
	}
}

// allowClustered is allowNanos for a clustered limiter, apart so that the
// standalone path stays small.
func (l *Limiter) allowClustered(now int64) (bool, time.Duration) {
	e, lz := l.eng, l.leases
	if e.mode.Load() == modeNormal {
		if lz != nil && lz.hot(now) {
			return lz.allow(countedSource{e}, l.pol, now)
		}
		if ok, retry, count, fast, contended := e.global.allow(l.pol, now); fast {
			// Only the first unreported token and the threshold
			// schedule a flush: checked here, the common case makes
			// no call.
			if ok && (count == 1 || count == l.pol.flushAt.Load()) {
				e.counted(count, 1, l.pol)
			}
			if contended && lz != nil {
				lz.lost(now)
			}
			if ok {
				return true, 0
			}
			return l.stealOr(now, retry)
		}
	}
	// Not normal, or past the cap of unreported tokens: the general path.
	var d Decision
	e.takeGlobal(&d, now, 1)
	if !d.Allowed {
		return l.stealOr(now, d.RetryAfter)
	}
	return true, 0
}

// stealOr answers a one-token request that the global bucket denied: with
// a token from any processor's fresh lease if there is one, unless the node
// is cut off under fail-closed; otherwise with the denial.
func (l *Limiter) stealOr(now int64, retry time.Duration) (bool, time.Duration) {
	if lz := l.leases; lz != nil && (l.eng == nil || l.eng.mode.Load() != modeClosed) && lz.steal(now) {
		return true, 0
	}
	return false, retry
}

// Take spends n tokens of key's bucket now; the key "" is the global
// bucket. It returns an error only for a cost below 1 or above the key's
// bucket size; a denial is a Decision with Allowed false.
func (l *Limiter) Take(key string, n int64) (d Decision, err error) {
	err = l.take(&d, int64(time.Since(l.epoch)), key, n)
	return
}

// TakeAt is Take at the given time.
func (l *Limiter) TakeAt(now time.Time, key string, n int64) (d Decision, err error) {
	err = l.take(&d, l.nanos(now), key, n)
	return
}

// take decides into d, which saves copying a Decision up every level.
func (l *Limiter) take(d *Decision, now int64, key string, n int64) error {
	if key == "" {
		if err := l.pol.checkCost(n); err != nil {
			return err
		}
		if l.eng != nil {
			l.eng.takeGlobal(d, now, n)
			l.stealInto(d, now, n)
			return nil
		}
		takeInto(d, &l.global.tat, l.pol, now, n)
		l.stealInto(d, now, n)
		return nil
	}
	h := hashKey(l.seed, key)
	p := l.policyFor(h)
	if err := p.checkCost(n); err != nil {
		return err
	}
	if l.eng != nil {
		if cd, closed := l.eng.gateClosed(p); closed {
			*d = cd
			return nil
		}
	}
	l.keys.take(d, h, p, now, n, l.eng)
	return nil
}

// Refund gives back n tokens to key's bucket, for a request that was
// allowed but should not count (for example one that failed). A bucket is
// never filled past full. Clustered, a refund of tokens not yet reported to
// peers also takes them out of the report.
func (l *Limiter) Refund(key string, n int64) {
	l.refund(int64(time.Since(l.epoch)), key, n)
}

// RefundAt is Refund at the given time.
func (l *Limiter) RefundAt(now time.Time, key string, n int64) {
	l.refund(l.nanos(now), key, n)
}

func (l *Limiter) refund(now int64, key string, n int64) {
	if n < 1 {
		return
	}
	if key == "" {
		n = min(n, l.pol.burst)
		if l.eng != nil {
			l.eng.refundGlobal(now, n)
			return
		}
		refund(&l.global.tat, l.pol, now, n)
		return
	}
	h := hashKey(l.seed, key)
	p := l.policyFor(h)
	n = min(n, p.burst)
	if e := l.keys.lookup(h); e != nil {
		refund(&e.tat, p, now, n)
		if l.keys.clustered {
			unreport(e.pending(), n)
		}
	}
}

// unreport takes up to n tokens out of a not-yet-sent count.
func unreport(pending *atomic.Int64, n int64) {
	for {
		old := pending.Load()
		if old <= 0 || pending.CompareAndSwap(old, max(0, old-n)) {
			return
		}
	}
}

func (l *Limiter) policyFor(h uint64) *policy {
	if l.overrides != nil {
		if p, ok := l.overrides[h]; ok {
			return p
		}
	}
	return l.pol
}

// policies calls f for the default policy and every override.
func (l *Limiter) policies(f func(*policy)) {
	f(l.pol)
	for _, p := range l.overrides {
		f(p)
	}
}

func (p *policy) checkCost(n int64) error {
	if n < 1 {
		return ErrInvalidCost
	}
	if n > p.burst {
		return fmt.Errorf("%w: cost %d, bucket size %d", ErrCostExceedsLimit, n, p.burst)
	}
	return nil
}

// RefillRate is the configured refill rate in tokens per second.
func (l *Limiter) RefillRate() int64 { return l.pol.rate }

// BucketSize is the configured bucket size in tokens.
func (l *Limiter) BucketSize() int64 { return l.pol.burst }

// NodeName is this node's name.
func (l *Limiter) NodeName() string { return l.name }

// Close stops a clustered limiter's gossip, telling its peers that it is
// leaving so that they stop counting it at once. It is idempotent and never
// closes the Transport. A closed limiter keeps deciding, as if standalone.
func (l *Limiter) Close() error {
	l.closeOnce.Do(func() {
		if l.eng != nil {
			l.eng.stop()
		}
		l.log.Debug("limiter closed", "node", l.name)
	})
	return nil
}
