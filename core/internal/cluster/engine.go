package cluster

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/datagram"
	"github.com/pedreviljoen/gopherpace/core/internal/wire"
	"github.com/pedreviljoen/gopherpace/core/transportkit"
)

// The engine is the clustered part of a Limiter. It counts what this node
// admits, sends those counts to every peer (every half gossip interval, and
// early once enough go unreported), charges peers' counts to the local
// replicas as debt, and scales the refill while only part of the cluster is
// in sight. docs/design.md explains the algorithm and its bounds.
//
// It is a composition of parts, each in a file of its own that is the only
// one to change the part's state:
//
//	part           file                     owns
//	engineEnv      engine.go                what is fixed once started: names, timing, transport, clock, the limiter's buckets
//	countedWord    counted_word.go          the clustered global bucket, lock-free
//	modeState      mode.go                  the mode the request path obeys, the pre-contact budget
//	sender         sender.go                unsent counts, flush timers, this node's running total, frames kept for resending
//	receiver       receiver.go              decoding and charging peers' frames, frames of senders not listed yet
//	peerView       membership.go, peers.go  the peers and their streams, who is in sight, the buckets' clock (lag)
//	fairShares     fairness.go, load.go     the share while contended, offered load, resyncs of the replica
//	joining        join.go                  first contact, and joining a running cluster
//
// A part reaches another only through the interfaces of links.go, which
// name every method it calls on it. The engine itself holds only the
// lifecycle (start, the tick, stop) and the wiring; the request path
// (decide_clustered.go) is its entry point for callers.
//
// Locking: one lock, engine.mu, is held by every entry point other than the
// request path: a tick, a kicked flush, a frame arriving, stop, Peers and
// Stats. A part's plain fields are read and written only under it. The
// request path takes no lock: it touches only the fields each part marks as
// lock-free (atomics and the words), never a plain field.
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
	degradedLogEvery = datagram.WarnEvery
	// partitionAfter is how long peers must stay out of reach before it is
	// logged as a partition (at ERROR) rather than a slow peer (at WARN).
	partitionAfter = int64(2 * time.Second)
)

// Parts is what a clustered limiter hands its engine: the buckets the
// engine counts and charges, and how to name and time things.
type Parts struct {
	Epoch time.Time // the limiter's: its times are nanoseconds since it
	Name  string    // the node's name on the transport
	Log   *slog.Logger
	Rules *bucket.Book
	Keys  *Store
	// Standalone is the plain global word that a closed limiter decides
	// on; the engine hands the global state back to it on Stop.
	Standalone *atomic.Int64
	// Leases hand out the global bucket's tokens per processor while it
	// is hot; nil when it is too small to lease.
	Leases *bucket.Leases
	// KeyHashID is the fingerprint of the key hash's secret, on every
	// frame with keyed counts.
	KeyHashID uint32
}

// engineParts is Parts as every part reads them, promoted through
// engineEnv.
type engineParts struct {
	epoch time.Time
	name  string
	log   *slog.Logger
	rules *bucket.Book
	keys  *Store
	// standalone is the plain global word that a closed limiter decides
	// on; the engine hands the global state back to it on stop.
	standalone *atomic.Int64
	// leases hand out the global bucket's tokens per processor while it
	// is hot; nil when it is too small to lease.
	leases *bucket.Leases
	// keyHashID is the fingerprint of the key hash's secret, on every
	// frame with keyed counts (keyhash.go).
	keyHashID uint32
}

// engineEnv is what every part shares and none changes once the engine has
// started: set by newEngine, and by start (inc, startedAt) under the lock
// before any tick, frame or request can read it.
type engineEnv struct {
	engineParts
	t         datagram.Transport
	hub       *datagram.Hub // the transport's one subscriber, shared with its other limiters
	clock     transportkit.Clock
	id        uint64 // hash of the limiter ID, on every frame
	inc       uint64 // incarnation: this node's start time
	startedAt int64
	tick      int64 // ns between ticks: half the gossip interval
	interval  int64
	isolation int64 // silence after which a peer counts as cut off
	grace     int64
	partition Partition
	maxFrame  int
	floor     bool // reference-design baseline
}

type Engine struct {
	engineEnv
	mu sync.Mutex // the engine lock (see above)

	word      countedWord
	mode      modeState
	send      sender
	recv      receiver
	view      peerView
	fair      fairShares
	keyShares keyShares
	join      joining

	// clockNow is the engine's time at its last tick (lock-free: the
	// request path reads it).
	clockNow atomic.Int64
	// Under mu.
	stopped     bool
	stopTick    func() bool
	unsubscribe func()
}

// Config is what a limiter's options set for its engine.
type Config struct {
	LimiterID string             // the limiter's ID: peers' frames of the same ID are this limiter's
	Transport datagram.Transport // the cluster's transport, any of core's optional interfaces among its methods
	Clock     transportkit.Clock // the transport's clock, or the real one
	Interval  time.Duration      // the gossip interval
	Grace     time.Duration      // how long a silent peer is still counted as a member
	Partition Partition
	// FloorAtZero runs the reference design's algorithm, as the accuracy
	// harness's baseline.
	FloorAtZero bool
}

// New wires an engine for a limiter's parts; Start sets it going.
func New(p Parts, c Config) *Engine {
	e := &Engine{engineEnv: engineEnv{
		engineParts: engineParts{epoch: p.Epoch, name: p.Name, log: p.Log, rules: p.Rules, keys: p.Keys,
			standalone: p.Standalone, leases: p.Leases, keyHashID: p.KeyHashID},
		t:         c.Transport,
		clock:     c.Clock,
		id:        wire.NameHash(0, c.LimiterID),
		interval:  int64(c.Interval),
		tick:      int64(c.Interval) / 2,
		isolation: int64(c.Interval) * 3 / 2,
		grace:     int64(c.Grace),
		partition: c.Partition,
		maxFrame:  datagram.FrameRoom(c.Transport),
		floor:     c.FloorAtZero,
	}}
	// The wiring: each part sees the environment and the parts it reads.
	env := &e.engineEnv
	flushDelay := FlushDelayFor(c.Interval)
	if e.floor {
		flushDelay = e.tick // the reference design reports on its ticks only
	}
	e.send = sender{engineEnv: env, word: &e.word, fair: &e.fair, keyShares: &e.keyShares, view: &e.view, onKick: e.onKick, onArmed: e.onArmed,
		flushDelay: flushDelay}
	e.recv = receiver{engineEnv: env, word: &e.word, view: &e.view, fair: &e.fair, keyShares: &e.keyShares, join: &e.join,
		// A newcomer to a contended cluster would otherwise race freely
		// until its first tick: half a gossip interval at most.
		onJoinedRunning: func(now int64) {
			e.fair.joinedRunning(now)
			e.fair.rebalance(now, e.send.globalSum)
		}}
	e.view = newPeerView(env, &e.mode, e.recv.afterRefresh)
	e.fair = fairShares{engineEnv: env, word: &e.word, view: &e.view, denied: bucket.NewProcCounter()}
	e.fair.share.setGate(p.Rules.Default())
	// A sliced share starts part of the way to its first token, at a phase
	// of its own: started alike, every node of a cold cluster would earn
	// its first token in the same millisecond.
	e.fair.share.init(int64(wire.NameHash(0, p.Name) % sliceOne))
	e.keyShares = newKeyShares(env, &e.view)
	e.join = joining{engineEnv: env, word: &e.word, mode: &e.mode, view: &e.view}
	return e
}

// FlushDelayFor is how long after the first unsent change a node of
// gossip interval interval reports it: a twentieth of the interval,
// between minFlushGap and 5 ms.
func FlushDelayFor(interval time.Duration) int64 {
	return min(max(int64(interval)/20, minFlushGap), int64(5*time.Millisecond))
}

// now is the engine's clock in nanoseconds since the limiter's epoch.
func (e *engineEnv) now() int64 { return bucket.ClampNanos(e.clock.Now().Sub(e.epoch)) }

// bucketTime converts a time on the engine's clock (or a caller's) to the
// buckets' clock (see peerView.bucketTime).
func (e *Engine) bucketTime(now int64) bucket.Time { return e.view.bucketTime(now) }

func (e *Engine) Start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	e.clockNow.Store(now)
	e.startedAt = now
	e.word.init(e.bucketTime(now))
	e.inc = uint64(e.clock.Now().UnixNano())
	e.send.begin(now)
	members := e.view.refreshMembers(now)
	e.view.retune(now, 1+len(members), 1+len(members))
	// Until a peer is heard, spend at most this node's share of the
	// bucket: every node may be starting into the same flash crowd.
	e.mode.begin(len(members) > 0 && !e.floor, bucket.CeilDiv(e.rules.Default().BucketSize, int64(1+len(members))))
	e.hub = datagram.Join(e.t, e.id, e, e.tick, e.clock, e.log)
	e.unsubscribe = func() { e.hub.Leave(e.id) }
	e.stopTick = e.clock.AfterFunc(e.untilTick(), e.onTick)
}

// untilTick is the time until this node's first tick: the next instant of
// a grid that starts when the transport's hub began, at a phase derived
// from the node's name. Nodes do not all send at once, simulations repeat
// exactly, and the limiters of one node (of one gossip interval) start
// ticking at the same instants, so that their heartbeats share datagrams
// (datagram.Hub). Later ticks follow a whole tick after the last one ran, not
// the grid: under a starved scheduler, a grid brought a late tick's
// successor only milliseconds after it, before the peers' queued frames
// were read, and their silence was taken for a partition (30 replicas in
// one process over real memberlist admitted 28% under the limit, against
// 10% with ticks a whole tick apart; examples/scale).
func (e *engineEnv) untilTick() time.Duration { return e.untilGrid(e.tick) }

// untilGrid is the time until the next instant of a grid every apart,
// from the hub's start at this node's phase: never zero, at most every.
func (e *engineEnv) untilGrid(every int64) time.Duration {
	phase := int64(wire.NameHash(0, e.name) % uint64(every))
	at := int64(e.clock.Now().Sub(e.hub.Began())) - phase
	return time.Duration(every - (at%every+every)%every)
}

// onTick is every part's turn, in order: who joined and who is in sight,
// the shares, the resync, then the counts go out (with the resends of the
// last ticks' frames, and at least a heartbeat).
func (e *Engine) onTick() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	now := e.now()
	e.clockNow.Store(now)
	e.join.tick(now)
	e.view.evaluate(now)
	e.fair.rebalance(now, e.send.globalSum)
	e.fair.resync(now)
	e.keyShares.rebalance(now)
	e.send.tick(now)
	e.stopTick = e.clock.AfterFunc(time.Duration(e.tick), e.onTick)
}

// onKick is the early flush that the request path schedules (sender.kick).
func (e *Engine) onKick() {
	e.send.kickFired()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	e.send.kickedFlush(e.now())
}

// onArmed is the flush of counts that waited flushDelay (sender.armFlush).
func (e *Engine) onArmed() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		e.send.disarm()
		return
	}
	e.send.armedFlush(e.now())
}

// Deliver is the hub's delivery of a peer's frame.
func (e *Engine) Deliver(from string, b []byte, relayed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	e.recv.receive(from, b, relayed)
	if e.view.takeArrival() {
		e.send.wake(e.now())
	}
}

// TaggedStream is what a tagged digest entry of from's needs of the
// stream its tag stands for, among those this engine has heard (the
// freshest, if two share the tag): its incarnation, and its latest
// running totals when the stream was heard within horizon (else
// Recent is false and a truncated total cannot be widened).
func (e *Engine) TaggedStream(from string, tag uint16, horizon int64) (t datagram.TaggedStream, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.view.peer(from)
	if p == nil {
		return datagram.TaggedStream{}, false
	}
	s := p.tagged(tag)
	if s == nil {
		return datagram.TaggedStream{}, false
	}
	return datagram.TaggedStream{Incarnation: s.incarnation, Global: s.lastGlobal, Demand: s.lastDemand,
		Recent: e.now()-s.lastHeard <= horizon}, true
}

// Stop sends a last frame that says goodbye, with any unsent counts, and
// stops all timers.
func (e *Engine) Stop() {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.stopped = true
	e.mode.enter(modeStopped)
	e.stopTick()
	now := e.now()
	// Hand the global bucket back first: from then on decisions are made on
	// the standalone word (core's decider.go); what it held unreported goes out in
	// the goodbye.
	e.word.handBack(e.standalone, e.rules.Default(), e.bucketTime(now), now)
	e.send.goodbye(now)
	e.mu.Unlock()
	// Outside e.mu: a frame being delivered right now holds the transport's
	// side and waits for e.mu (and finds the engine stopped).
	e.unsubscribe()
}

// resize sizes rule's caps for the cluster as this node knows it, for a
// rule changed while running (SetRate, SetOverride).
func (e *Engine) resize(rule *bucket.Rule) {
	e.mu.Lock()
	defer e.mu.Unlock()
	bucket.SizeCaps(rule, int(max(1, e.view.stats.known.Load())))
}

// maxDebt is how far beyond empty a peer's charges may take a bucket of rule:
// one bucket, or nothing for the reference design, which floors at zero.
func (e *engineEnv) maxDebt(rule *bucket.Rule) int64 {
	if e.floor {
		return 0
	}
	return rule.Tolerance
}

// warnf logs a WARN record at most once per degradedLogEvery, tracked in
// *last, a field of the calling part; the caller holds the engine's lock.
func (e *engineEnv) warnf(now int64, last *int64, msg string, args ...any) {
	e.logEvery(slog.LevelWarn, now, last, msg, args)
}

// errorf is warnf at ERROR, for what a person must fix.
func (e *engineEnv) errorf(now int64, last *int64, msg string, args ...any) {
	e.logEvery(slog.LevelError, now, last, msg, args)
}

func (e *engineEnv) logEvery(level slog.Level, now int64, last *int64, msg string, args []any) {
	if *last != 0 && now-*last < degradedLogEvery {
		return
	}
	*last = now
	e.log.Log(context.Background(), level, msg, append([]any{"node", e.name}, args...)...)
}
