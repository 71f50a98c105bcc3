package gopherpace

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/transportkit"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// The engine is the clustered part of a Limiter. It counts what this node
// admits, sends those counts to every peer (every half gossip interval, and
// early once enough go unreported), charges peers' counts to the local
// replicas as debt, and scales the refill while only part of the cluster is
// in sight. docs/design.md explains the algorithm and its bounds.
//
// Its work is split by concern: this file holds its state and lifecycle;
// mode.go the modes the request path obeys; decide_clustered.go the request path
// (deciding and counting admits); flush.go the timers that send counts;
// receive.go charging what peers send; membership.go working out who is in
// sight. It reaches the limiter only through engineParts.

const (
	// minFlushGap spaces early flushes, so that a hot bucket sends at most
	// 1000 frames a second.
	minFlushGap = int64(time.Millisecond)
	// reportFlight is how long a report counts as not yet heard by the
	// peers: more than delivery takes on a LAN (see overCap).
	reportFlight = int64(2 * time.Millisecond)
	// resendTicks is how many later ticks resend a frame, so that a count
	// is lost only if all 1+resendTicks copies are.
	resendTicks = 2
	// degradedLogEvery spaces the ERROR records of a lasting partition.
	degradedLogEvery = int64(30 * time.Second)
	// partitionAfter is how long peers must stay out of reach before it is
	// logged as a partition (at ERROR) rather than a slow peer (at WARN).
	partitionAfter = int64(2 * time.Second)
	dirtyShards    = 64
)

// engineParts is what a clustered limiter hands its engine: the buckets
// the engine counts and charges, and how to name and time things.
type engineParts struct {
	epoch time.Time
	name  string
	log   *slog.Logger
	pols  *policies
	keys  *clusterStore
	// standalone is the plain global word that a closed limiter decides
	// on; the engine hands the global state back to it on stop.
	standalone *atomic.Int64
	// leases hand out the global bucket's tokens per processor while it
	// is hot; nil when it is too small to lease.
	leases *leases
}

type engine struct {
	engineParts
	t         Transport
	clock     transportkit.Clock
	id        uint64
	inc       uint64 // incarnation
	tick      int64  // ns between ticks: half the gossip interval
	interval  int64
	isolation int64 // silence after which a peer counts as cut off
	grace     int64
	partition PartitionPolicy
	maxFrame  int
	floor     bool // reference-design baseline

	global     countedBucket
	mode       atomic.Int32 // see mode.go
	share      shareBucket  // while contended, what this node may admit (fairness.go)
	denied     procCounter
	clockNow   atomic.Int64 // the engine's time at its last tick
	lag        atomic.Int64 // how far the buckets' clock runs behind (membership.go)
	preBudget  atomic.Int64
	kicked     atomic.Bool
	flushArmed atomic.Bool
	flushDelay int64 // the longest a first unreported admit waits
	dirty      [dirtyShards]dirtyList
	stats      engineStats

	mu         sync.Mutex // guards the fields below
	started    bool
	seq        uint64
	globalSum  uint64                    // global tokens reported since this incarnation began
	sent       [resendTicks + 1][][]byte // frames of this tick and the last ones
	lastFlush  int64
	peers      map[string]*peer
	startedAt  int64
	learned    bool // whether this node has settled newcomer or founder
	contacted  bool
	degraded   bool
	lastErrLog int64
	splitSince int64 // when peers went out of reach
	// lastMemberRefresh is when the transport's member list was last read.
	lastMemberRefresh int64
	// lastSkewWarn, lastSendWarn and lastLateWarn space WARN records (see
	// warnf).
	lastSkewWarn, lastSendWarn, lastLateWarn int64
	lastEval                                 int64 // when evaluate last ran
	stopped                                  bool
	stopTick                                 func() bool
	unsubscribe                              func()
	rx                                       wire.Frame
	unlisted                                 unlisted // frames of senders not listed yet (receive.go)
	batch                                    []wire.KeyCount
	// own is this node's admit and demand rates (fairness.go).
	own load
	// withheld is the share of the refill this node withheld over its
	// last evaluation for peers out of its own sight (membership.go).
	withheld float64
}

// dirtyList is one shard of the keyed entries that hold unsent counts.
type dirtyList struct {
	mu   sync.Mutex
	list []dirtyKey
	_    [32]byte
}

type dirtyKey struct {
	h uint64
	e *clusterEntry
}

type engineStats struct {
	framesSent, bytesSent, framesReceived, bytesReceived atomic.Uint64
	malformed, duplicate, otherLimiter, keysDropped      atomic.Uint64
	notMember, sendFailures, resynced                    atomic.Uint64
	lostPrevious                                         atomic.Uint64
	tokensReported, tokensCharged                        atomic.Uint64
	visible, known, heard                                atomic.Int64
}

func newEngine(parts engineParts, c *config) *engine {
	e := &engine{
		engineParts: parts,
		denied:      newProcCounter(),
		t:           c.transport,
		clock:       realClock{},
		id:          hashKey(0, c.limiterID),
		interval:    int64(c.interval),
		tick:        int64(c.interval) / 2,
		isolation:   int64(c.interval) * 3 / 2,
		flushDelay:  min(max(int64(c.interval)/20, minFlushGap), int64(5*time.Millisecond)),
		grace:       int64(c.grace),
		partition:   c.partition,
		maxFrame:    c.transport.MaxFrameSize(),
		floor:       c.floorAtZero,
		peers:       make(map[string]*peer),
	}
	if clk, ok := c.transport.(transportkit.Clock); ok {
		e.clock = clk
	}
	if e.floor {
		e.flushDelay = e.tick // the reference design reports on its ticks only
	}
	e.share.setGate(parts.pols.dflt())
	return e
}

// now is the engine's clock in nanoseconds since the limiter's epoch.
func (e *engine) now() int64 { return clampNanos(e.clock.Now().Sub(e.epoch)) }

// bucketTime converts a time on the engine's clock (or a caller's) to the
// buckets' clock, which runs behind it by the lag built up while peers
// were out of sight (membership.go).
func (e *engine) bucketTime(now int64) int64 { return now - e.lag.Load() }

func (e *engine) start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	e.clockNow.Store(now)
	e.startedAt = now
	e.global.init(now)
	e.inc = uint64(e.clock.Now().UnixNano())
	e.lastFlush = now - minFlushGap
	members := e.refreshMembers(now)
	e.retune(now, 1+len(members), 1+len(members))
	if len(members) > 0 && !e.floor {
		// Until a peer is heard, spend at most this node's share of the
		// burst: every node may be starting into the same flash crowd.
		e.preBudget.Store(ceilDiv(e.pols.dflt().burst, int64(1+len(members))))
		e.enter(modePreContact)
	}
	e.started = true
	e.unsubscribe = e.t.Subscribe(e.receive)
	// Start ticking at a phase of its own, so that nodes do not all send at
	// once; derived from the name so that simulations repeat exactly.
	phase := time.Duration(hashKey(e.id, e.name)%uint64(e.tick) + 1)
	e.stopTick = e.clock.AfterFunc(phase, e.onTick)
}

// stop sends a last frame that says goodbye, with any unsent counts, and
// stops all timers.
func (e *engine) stop() {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.stopped = true
	e.enter(modeStopped)
	e.stopTick()
	now := e.now()
	// Hand the global bucket back first, so that takers spin for as short
	// a time as possible; what it held unreported goes out in the goodbye.
	e.global.handBack(e.standalone, e.pols.dflt(), e.bucketTime(now), now)
	frames := e.flushLocked(now, true, true)
	for range resendTicks {
		for _, f := range frames {
			e.broadcast(f)
		}
	}
	e.mu.Unlock()
	// Outside e.mu: a frame being delivered right now holds the transport's
	// side and waits for e.mu (and finds the engine stopped).
	e.unsubscribe()
}
