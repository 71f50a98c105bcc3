package gopherpace

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/cluster"
	"github.com/pedreviljoen/gopherpace/core/transportkit"
)

// The package's files, one concept each:
//
//	limiter.go
//	    Limiter, New, Close
//	allow.go, take.go
//	    the request path a caller enters: Allow, Take, Refund and their ...At
//	    forms (allow.go lists the paths of a one-token Allow and the test
//	    guarding each), and the one pipeline every decision goes through:
//	    clock → decide (with a leased token stolen for a one-token denial) →
//	    wait for the report (real-clock forms) → shadow → count; the cost
//	    check
//	decider.go
//	    the choice between standalone and clustered, made once in New, and the
//	    one place that acts on it (one branch on a concrete type: a Decision
//	    passed through an interface would escape to the heap); standalone, the
//	    limiter's own buckets
//	reportwait.go
//	    waitForReport, the one loop in which every real-clock form waits for
//	    this node's report
//	options.go
//	    Option, every With..., validation
//	refund.go, charge.go, reserve.go
//	    the bound on refunds; Charge, a cost spent after the fact into debt up
//	    to one bucket; Reserve, tokens booked up to one window ahead for
//	    callers that wait
//	combine.go
//	    Limits: several limits a request passes together, all or nothing
//	topkeys.go, topkeys_gossip.go
//	    TopKeys: the keys denied and admitted most lately, in counters of
//	    fixed number; ClusterTopKeys: every second a node sends its heaviest
//	    keys to its peers, by hash
//	inflight.go, inflight_gossip.go, gauge_link.go
//	    InFlight: in-flight limits on internal/inflight's table, and their
//	    gossip; a part's end of the gauge frames (the in-flight limits' and
//	    the top keys'): frames cut to size, the goodbye, who may be heard
//	peek.go, wait.go, shadow.go
//	    reading and resetting a bucket; waiting for tokens; shadow mode's
//	    would-be denials
//	setrate.go, lookup.go
//	    changing limits while running, with repricing; limits looked up per
//	    key, cached with a bound
//	decision.go, decision_counts.go, errors.go, stats.go, wrap.go
//	    results; the decision counters; errors; the Stats snapshot; the seed's
//	    Wrap
//	peerlist.go, registry.go
//	    Peers; the limiter IDs in use per transport
//	transport.go
//	    the Transport contract and its optional capabilities

// Limiter enforces one rate-limit rule: a refill rate and a bucket size,
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
// A Limiter is safe for concurrent use. It must be created with New: the
// methods of a zero Limiter panic.
type Limiter struct {
	global    bucket.Plain // the global word while standalone, and after Close
	epoch     time.Time
	rules     bucket.Book
	lookup    *lookupCache       // nil without WithLookup (lookup.go)
	keys      *bucket.PlainStore // nil when clustered: the engine holds the keys
	hasher    bucket.KeyHasher
	name      string
	log       *slog.Logger
	dec       decider        // standalone or the engine: chosen once, in New (decider.go)
	leases    *bucket.Leases // nil when the bucket is too small to lease
	transport Transport      // nil when standalone
	release   func()         // frees the limiter ID on the transport
	closeOnce sync.Once
	closed    atomic.Bool // Close was called (Stats.Closed)
	shadow    *shadowing  // nil unless WithShadowMode
	changeMu  sync.Mutex  // serialises changes of the rules (setrate.go)
	counts    decisionCounts
	top       *topKeys // nil unless WithTopKeys (topkeys.go)
	// topGossip sends the top keys to the peers and keeps theirs; nil
	// unless clustered WithTopKeys (topkeys_gossip.go).
	topGossip *topKeysGossip
	// refundsRefused counts refunds of tokens the key cannot have spent
	// (refund.go).
	refundsRefused refusedRefunds
}

// New returns a Limiter configured by opts. A rate is required (WithRate or
// WithRefillRate, not both). Invalid options give an error naming every
// bad option at once; New never panics on configuration.
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
	def, err := bucket.NewRule(c.rate, c.per, c.bucketSize)
	if err != nil {
		return nil, errorf("%s: %w", c.rateWords, err) // checked in finish
	}
	epoch := time.Now()
	if clk, ok := c.transport.(transportkit.Clock); ok {
		// On a simulated network's clock, so that a simulation's times, and
		// so its every decision, are the same on every run.
		epoch = clk.Now()
	}
	l := &Limiter{
		epoch:  epoch,
		name:   c.nodeName,
		log:    c.logger.With("component", "gopherpace"),
		counts: newDecisionCounts(),
	}
	var publicHash bool
	l.hasher, publicHash = c.keyHasher()
	if publicHash {
		l.log.Warn("the key hash has no secret: the transport gives none (plaintext gossip), so anyone can compute which keys share a bucket or a shard. Pin one with WithKeyHashSecret, the same on every node",
			"node", l.name, "limiter", c.limiterID)
	}
	l.dec.standalone((*standalone)(l))
	var overrides map[uint64]bucket.OwnRule
	for _, o := range c.overrides {
		rule, err := bucket.NewRule(o.tokens, o.per, o.bucketSize)
		if err != nil {
			return nil, errorf("%s: %w", o.words, err) // checked in finish
		}
		if overrides == nil {
			overrides = make(map[uint64]bucket.OwnRule, len(c.overrides))
		}
		overrides[l.hasher.Sum(o.key)] = bucket.OwnRule{Rule: rule, Key: o.key}
	}
	l.rules.Replace(&bucket.RuleSet{Default: def, Overrides: overrides})
	if c.shadow {
		l.shadow = &shadowing{denials: bucket.NewProcCounter()}
	}
	if c.topKeys {
		l.top = &topKeys{show: c.topShown}
	}
	l.global.Init()
	l.leases = bucket.NewLeases(def)
	if c.leaseProcs > 0 {
		l.leases = bucket.NewLeasesFor(def, c.leaseProcs)
	}
	if c.transport == nil {
		l.keys = bucket.NewPlainStore(c.maxKeys, l.log, l.rules.ForKey)
	} else {
		if def.Tolerance > cluster.MaxTolerance {
			return nil, errorf("%s: a bucket of %d takes %s to refill, over the %s a clustered limiter allows: lower the bucket size or raise the rate",
				c.rateWords, def.BucketSize, bucket.LongDuration(def.Tolerance), bucket.LongDuration(cluster.MaxTolerance))
		}
		release, err := register(c.transport, c.limiterID)
		if err != nil {
			return nil, err
		}
		l.transport, l.release = c.transport, release
		l.rules.Each(func(rule *bucket.Rule) { bucket.ClusteredReach(rule, c.floorAtZero) })
		// The clustered bucket holds the global state until Close hands it
		// back; meanwhile the standalone word stays marked.
		l.global.HandOver()
		eng := cluster.New(cluster.Parts{
			Epoch: l.epoch, Name: l.name, Log: l.log, Rules: &l.rules,
			Keys: cluster.NewStore(c.maxKeys, l.log, l.rules.ForKey), Standalone: &l.global.TAT, Leases: l.leases,
			KeyHashID: l.hasher.Fingerprint(),
		}, cluster.Config{LimiterID: c.limiterID, Transport: c.transport, Clock: clockOf(c.transport), Interval: c.interval,
			Grace: c.grace, Partition: cluster.Partition(c.partition), FloorAtZero: c.floorAtZero})
		l.dec.cluster(eng)
		eng.Start()
		if l.top != nil {
			l.topGossip = newTopKeysGossip(l, &c)
		}
	}
	if c.lookup != nil {
		l.lookup = newLookupCache(*c.lookup, func(q Quota) (*bucket.Rule, error) {
			return l.buildRule(q.Tokens, q.Per, q.BucketSize)
		})
		l.rules.LookUpWith(l.lookup)
	}
	l.log.Debug("limiter created", "node", l.name, "rate", def.Tokens, "per", def.Per, "bucket_size", def.BucketSize, "clustered", c.transport != nil)
	return l, nil
}

// nanos converts a caller's time to nanoseconds since the limiter's epoch,
// clamped to ±bucket.MaxNow (146 years): any time.Time a caller passes, the zero
// value included, gives a time the buckets' arithmetic handles.
func (l *Limiter) nanos(now time.Time) int64 { return bucket.ClampNanos(now.Sub(l.epoch)) }

// RefillRate is the default rule's rate in whole tokens per second,
// rounded down: 0 for rates below one a second (see Rate).
func (l *Limiter) RefillRate() int64 {
	return int64(float64(l.rules.Default().Tokens) * float64(time.Second) / float64(l.rules.Default().Per))
}

// Rate is the default rule's rate as configured: tokens per period.
func (l *Limiter) Rate() (tokens int64, per time.Duration) {
	return l.rules.Default().Tokens, l.rules.Default().Per
}

// BucketSize is the configured bucket size in tokens.
func (l *Limiter) BucketSize() int64 { return l.rules.Default().BucketSize }

// JoinError is the transport's word that the cluster refuses this node
// (JoinReporter), or nil: always standalone, and over a transport that
// cannot tell.
func (l *Limiter) JoinError() error {
	if r, ok := l.transport.(JoinReporter); ok {
		return r.JoinError()
	}
	return nil
}

// NodeName is this node's name.
func (l *Limiter) NodeName() string { return l.name }

// Close stops a clustered limiter's gossip, telling its peers that it is
// leaving so that they stop counting it at once. It is idempotent and never
// closes the Transport. A closed limiter keeps deciding, as if standalone.
func (l *Limiter) Close() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		if l.topGossip != nil {
			l.topGossip.stop()
		}
		l.dec.close()
		if l.release != nil {
			l.release()
		}
		l.log.Debug("limiter closed", "node", l.name)
	})
	return nil
}
