package gopherpace

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/inflight"
	"github.com/pedreviljoen/gopherpace/core/transportkit"
)

// InFlight caps the requests in flight at once (acquired and not yet
// released) per key, or in total under the key "", across every node of
// a cluster: "at most 100 calls to the payments backend at a time, from
// all replicas together". Standalone it is a counting semaphore per key
// that starts no goroutine.
//
// Clustered (WithTransport), each node decides alone and tells its peers
// what it holds, per key, over the same transport as its rate limiters.
// Under load the limit is shared in proportion to the requests each node
// is asked for, so that a replica behind an uneven load balancer gets its
// part. The cluster may hold more than the limit only by what the nodes
// have not heard of each other yet, which each node keeps small: at most
// Bound(N) for N nodes. A node's slots
// are given back to the others when it leaves, or when the transport
// declares it dead (memberlist's failure detection), never while it is
// only silent. docs/design.md, "In-flight limits", has the details.
//
// An InFlight is safe for concurrent use. It must be created with
// NewInFlight and, when clustered, closed with Close.
type InFlight struct {
	limit  int64
	epoch  time.Time
	clock  transportkit.Clock
	hasher bucket.KeyHasher
	table  *inflight.Table
	log    *slog.Logger
	gossip *inFlightGossip // nil standalone
	closed atomic.Bool
}

// NewInFlight returns a limit of limit requests in flight per key. It
// takes the options of a node (WithTransport, WithLimiterID,
// WithGossipInterval, WithNodeName, WithLogger, WithMaxKeys,
// WithKeyHashSecret) and refuses those of a rate. An in-flight limit
// and a rate limiter may share a transport and an ID.
func NewInFlight(limit int64, opts ...Option) (*InFlight, error) {
	c := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, errorf("nil Option")
		}
		o(&c)
	}
	if limit < 1 || limit > maxInFlightLimit {
		c.errs = append(c.errs, errorf("in-flight limit %d: it must be between 1 and %d", limit, maxInFlightLimit))
	}
	if err := c.finishInFlight(); err != nil {
		return nil, err
	}
	f := &InFlight{limit: limit, epoch: time.Now(), clock: realClock{}, log: c.logger.With("component", "gopherpace")}
	if clk, ok := c.transport.(transportkit.Clock); ok {
		f.clock, f.epoch = clk, clk.Now()
	}
	var public bool
	f.hasher, public = c.keyHasher()
	if c.transport == nil {
		f.table = inflight.NewStandalone(limit)
		return f, nil
	}
	if public {
		f.log.Warn("the key hash has no secret: the transport gives none (plaintext gossip), so anyone can compute which keys share a slot count. Pin one with WithKeyHashSecret, the same on every node",
			"node", c.nodeName, "limiter", c.limiterID)
	}
	release, err := register(c.transport, inFlightIDPrefix+c.limiterID)
	if err != nil {
		return nil, err
	}
	nodes := 1 + len(c.transport.Members())
	f.table = inflight.New(c.nodeName, limit, nodes, int(min(c.maxKeys, int64(maxPeerKeysInFlight))))
	f.gossip = newInFlightGossip(f, &c, release)
	return f, nil
}

const (
	// maxInFlightLimit bounds a limit: a gauge frame carries no more.
	maxInFlightLimit = int64(1) << 40
	// maxPeerKeysInFlight bounds the keys kept of each peer's reports.
	maxPeerKeysInFlight = 1 << 16
	// inFlightIDPrefix keeps an in-flight limit's registration apart from
	// a rate limiter's of the same ID.
	inFlightIDPrefix = "in flight: "
)

// Limit is the most requests in flight per key.
func (f *InFlight) Limit() int64 { return f.limit }

// Bound is the most requests in flight per key that a cluster of nodes
// nodes holds at once while reports arrive within three ticks (a tick is
// half the gossip interval): the limit, and what the nodes may not have
// heard of each other yet (docs/design.md, "In-flight limits").
// Standalone, the limit.
func (f *InFlight) Bound(nodes int) int64 {
	if f.gossip == nil {
		return f.limit
	}
	return inflight.Bound(f.limit, nodes)
}

func (f *InFlight) hash(key string) uint64 {
	if key == "" {
		return 0
	}
	if h := f.hasher.Sum(key); h != 0 {
		return h
	}
	return 1 // 0 is the keyless limit's
}

func (f *InFlight) now() int64 { return bucket.ClampNanos(f.clock.Now().Sub(f.epoch)) }

// TryAcquire takes a slot of key's if one is free, and returns the func
// that gives it back, to call once the request is done (calling it again
// does nothing). It never waits.
func (f *InFlight) TryAcquire(key string) (release func(), ok bool) {
	h := f.hash(key)
	if f.table.Acquire(h) != inflight.Admitted {
		return nil, false
	}
	return f.releaser(h), true
}

// Acquire waits for a slot of key's until ctx is done, and returns the func
// that gives it back, to call once the request is done (calling it again
// does nothing). It returns ctx's error if the wait ended first. Waiters
// are not served in order of arrival: each tries again whenever a slot
// may have come free (a release here, a peer's report, a tick).
func (f *InFlight) Acquire(ctx context.Context, key string) (release func(), err error) {
	h := f.hash(key)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		freed := f.table.Freed()
		if f.table.Acquire(h) == inflight.Admitted {
			return f.releaser(h), nil
		}
		select {
		case <-ctx.Done():
		case <-freed:
		}
	}
}

// releaser is what an admitted request of key hash h gets back: the func
// that gives its slot back. Clustered, the admit goes in the next report.
func (f *InFlight) releaser(h uint64) func() {
	if f.gossip != nil {
		f.gossip.changed()
	}
	r := &slotRelease{f: f, h: h}
	return r.release
}

// slotRelease gives back one slot, once.
type slotRelease struct {
	f    *InFlight
	h    uint64
	done atomic.Bool
}

func (r *slotRelease) release() {
	if !r.done.CompareAndSwap(false, true) {
		return
	}
	r.f.table.Release(r.h)
	if r.f.gossip != nil {
		r.f.gossip.changed()
	}
}

// Count is key's requests in flight: this node's, and the cluster's as
// this node knows it (its own and what each peer last reported).
func (f *InFlight) Count(key string) (own, cluster int64) {
	return f.table.Count(f.hash(key))
}

// InFlightStats are an in-flight limit's counters since it was created.
type InFlightStats struct {
	// Acquired counts the requests let in, Attempts every request asked
	// for, let in or not.
	Acquired, Attempts uint64
	// Refused counts the requests refused, Capped among them.
	Refused uint64
	// Capped counts the requests refused at the local cap: a slot was
	// free beyond this node's share, but it had taken its local cap of
	// those since its last tick.
	Capped uint64
	// Held and ClusterHeld are the keyless limit's requests in flight:
	// this node's, and the cluster's as this node knows it.
	Held, ClusterHeld int64
	// Peers is how many peers this node has heard from; FramesSent and
	// FramesDropped count its gauge frames sent and the peers' it could
	// not use (malformed, of a non-member, of another key hash secret's
	// keys), PeerKeysDropped the peers' keys beyond WithMaxKeys.
	Peers                     int
	FramesSent, FramesDropped uint64
	PeerKeysDropped           uint64
}

// Stats reads the counters.
func (f *InFlight) Stats() InFlightStats {
	c := f.table.Counts()
	st := InFlightStats{Acquired: c.Acquired, Attempts: c.Attempts, Refused: c.RefusedFull + c.RefusedCapped, Capped: c.RefusedCapped,
		Peers: c.Peers, PeerKeysDropped: c.DroppedEntries}
	st.Held, st.ClusterHeld = f.table.Count(0)
	if g := f.gossip; g != nil {
		st.FramesSent = g.link.sent.Frames.Load()
		st.FramesDropped = g.link.dropped.Load()
	}
	return st
}

// Close tells the peers this node holds nothing any more and stops its
// gossip. A closed limit keeps deciding, as if standalone (slots held
// are still given back by their release funcs). The transport is the
// caller's to close, after. Close is idempotent.
func (f *InFlight) Close() error {
	if !f.closed.CompareAndSwap(false, true) {
		return nil
	}
	if f.gossip != nil {
		f.gossip.stop()
	}
	return nil
}
