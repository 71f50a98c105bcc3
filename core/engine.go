package gopherpace

import (
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The engine is the clustered part of a Limiter. It counts what this node
// admits, sends those counts to every peer (every half gossip interval, and
// early once enough go unreported), charges peers' counts to the local
// replicas as debt, and scales the refill while only part of the cluster is
// in sight. docs/design.md explains the algorithm and its bounds.

const (
	modeNormal int32 = iota
	// modePreContact: just started with peers listed but none heard yet;
	// this node may spend only its share of the global burst.
	modePreContact
	// modeClosed: fail-closed and cut off from every peer.
	modeClosed
	// modeStopped: the limiter was closed; decide standalone.
	modeStopped
)

const (
	// minFlushGap spaces early flushes, so that a hot bucket sends at most
	// 1000 frames a second.
	minFlushGap = int64(time.Millisecond)
	// resendTicks is how many later ticks resend a frame, so that a count
	// is lost only if all 1+resendTicks copies are.
	resendTicks = 2
	// degradedLogEvery spaces the ERROR records of a lasting partition.
	degradedLogEvery = int64(30 * time.Second)
	dirtyShards      = 64
)

type engine struct {
	l         *Limiter
	t         Transport
	clock     Clock
	log       *slog.Logger
	id        uint64
	inc       uint64 // incarnation
	tick      int64  // ns between ticks: half the gossip interval
	interval  int64
	isolation int64 // silence after which a peer counts as cut off
	grace     int64
	partition PartitionPolicy
	maxFrame  int
	floor     bool // reference-design baseline

	global    countedBucket
	mode      atomic.Int32
	preBudget atomic.Int64
	kicked    atomic.Bool
	held      atomic.Bool
	holdFor   int64 // the longest a first unreported admit waits
	dirty     [dirtyShards]dirtyList
	stats     engineStats

	mu          sync.Mutex // guards the fields below
	seq         uint64
	globalSum   uint64                    // global tokens reported since this incarnation began
	sent        [resendTicks + 1][][]byte // frames of this tick and the last ones
	lastFlush   int64
	peers       map[string]*peer
	startedAt   int64
	learned     bool // whether this node has settled newcomer or founder
	contacted   bool
	degraded    bool
	lastErrLog  int64
	stopped     bool
	stopTick    func() bool
	unsubscribe func()
	rx          frame
	batch       []keyCount
}

type dirtyList struct {
	mu   sync.Mutex
	list []dirtyKey
	_    [32]byte
}

type dirtyKey struct {
	h uint64
	e *entry
}

type engineStats struct {
	framesSent, bytesSent, framesReceived, bytesReceived atomic.Uint64
	malformed, duplicate, otherLimiter, keysDropped      atomic.Uint64
	lostPrevious                                         atomic.Uint64
	tokensReported, tokensCharged                        atomic.Uint64
	visible, known, heard                                atomic.Int64
}

func newEngine(l *Limiter, c *config) *engine {
	e := &engine{
		l:         l,
		t:         c.transport,
		clock:     realClock{},
		log:       l.log,
		id:        hashKey(0, c.limiterID),
		interval:  int64(c.interval),
		tick:      int64(c.interval) / 2,
		isolation: int64(c.interval) * 3 / 2,
		holdFor:   min(max(int64(c.interval)/20, minFlushGap), int64(5*time.Millisecond)),
		grace:     int64(c.grace),
		partition: c.partition,
		maxFrame:  DefaultMaxFrameSize,
		floor:     c.floorAtZero,
		peers:     make(map[string]*peer),
	}
	if clk, ok := c.transport.(Clock); ok {
		e.clock = clk
	}
	if e.floor {
		e.holdFor = e.tick // the reference design reports on its ticks only
	}
	if fs, ok := c.transport.(FrameSizer); ok && fs.MaxFrameSize() > 0 {
		e.maxFrame = max(fs.MaxFrameSize(), headerMax+entryMax)
	}
	return e
}

func (e *engine) now() int64 { return e.l.nanos(e.clock.Now()) }

func (e *engine) start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	e.startedAt = now
	e.global.init(now)
	e.inc = uint64(e.clock.Now().UnixNano())
	e.lastFlush = now - minFlushGap
	members := e.t.Members()
	for _, name := range members {
		e.peers[name] = &peer{lastHeard: now}
	}
	e.retune(now, 1+len(members), 1+len(members))
	if len(members) > 0 && !e.floor {
		// Until a peer is heard, spend at most this node's share of the
		// burst: every node may be starting into the same flash crowd.
		e.preBudget.Store(ceilDiv(e.l.pol.burst, int64(1+len(members))))
		e.mode.Store(modePreContact)
	}
	e.unsubscribe = e.t.Subscribe(e.receive)
	// Start ticking at a phase of its own, so that nodes do not all send at
	// once; derived from the name so that simulations repeat exactly.
	phase := time.Duration(hashKey(e.id, e.l.name)%uint64(e.tick) + 1)
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
	e.mode.Store(modeStopped)
	e.stopTick()
	now := e.now()
	// Hand the global bucket back first, so that takers spin for as short
	// a time as possible; what it held unreported goes out in the goodbye.
	e.global.spill.Add(e.global.handBack(&e.l.global.tat, e.l.pol, now))
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

// ---- the request path ----

// takeGlobal decides n tokens of the global bucket into d.
func (e *engine) takeGlobal(d *Decision, now, n int64) {
	c, p := &e.global, e.l.pol
	pre := false
	switch e.mode.Load() {
	case modeStopped:
		e.takeStandalone(d, now, n)
		return
	case modeClosed:
		*d = closedDecision(p)
		return
	case modePreContact:
		if e.preBudget.Add(-n) < 0 {
			e.preBudget.Add(n)
			*d = waitDecision(p)
			return
		}
		pre = true
	}
	if wait, capped := e.overCap(c.unreported(c.word.Load()), p, n); capped {
		if pre {
			e.preBudget.Add(n)
		}
		*d = wait
		return
	}
	count, ok := c.take(d, p, now, n)
	if !ok { // handed back: the limiter is closing
		e.takeStandalone(d, now, n)
		return
	}
	if d.Allowed {
		e.counted(count, n, p)
	} else if pre {
		e.preBudget.Add(n)
	}
}

// takeStandalone decides on the standalone bucket of a closed limiter. The
// bucket stays marked evicted until the clustered one hands its state over,
// a moment after the mode changes.
func (e *engine) takeStandalone(d *Decision, now, n int64) {
	for !takeInto(d, &e.l.global.tat, e.l.pol, now, n) {
		runtime.Gosched()
	}
}

// countedSource is a clustered limiter's global bucket as the source of
// leases: a lease's tokens are counted for gossip as they are handed out,
// within the node's cap of unreported tokens.
type countedSource struct{ e *engine }

func (s countedSource) takeUpTo(p *policy, now, n int64) (int64, time.Duration, bool) {
	e, c := s.e, &s.e.global
	room := p.localCap.Load() - c.unreported(c.word.Load())
	if room < 1 {
		e.kick()
		return 0, time.Duration(minFlushGap), false
	}
	got, count, retry, contended, ok := c.takeUpTo(p, now, n, room)
	if !ok { // handed back: the limiter is closing
		return 0, time.Duration(minFlushGap), contended
	}
	if got > 0 {
		e.counted(count, got, p)
	}
	return got, retry, contended
}

func (s countedSource) giveBack(p *policy, now, n int64) { s.e.global.refund(p, now, n) }

// refundGlobal gives back n tokens of the global bucket.
func (e *engine) refundGlobal(now, n int64) {
	if e.mode.Load() == modeStopped {
		refund(&e.l.global.tat, e.l.pol, now, n)
		return
	}
	e.global.refund(e.l.pol, now, n)
}

// gateClosed answers keyed requests while fail-closed and cut off.
func (e *engine) gateClosed(p *policy) (Decision, bool) {
	if e.mode.Load() == modeClosed {
		return closedDecision(p), true
	}
	return Decision{}, false
}

// overCap holds back a request that would push this node's unreported
// admits past its share of the burst: the peers must hear first.
func (e *engine) overCap(pending int64, p *policy, n int64) (Decision, bool) {
	if pending+n <= p.localCap.Load() || e.mode.Load() == modeStopped {
		return Decision{}, false
	}
	e.kick()
	return waitDecision(p), true
}

// counted schedules the flush that reports a count that just grew by n to
// v: at once when it crosses the threshold, and within holdFor when it is
// the first unreported token. Holding every node's admits for the same
// short time keeps the cluster fair: a node whose admits stayed unreported
// longer would let its peers spend tokens it had already spent, and busy
// nodes, which flush more often, would win more and more of the bucket.
func (e *engine) counted(v, n int64, p *policy) {
	if at := p.flushAt.Load(); v >= at && v-n < at {
		e.kick()
	} else if v == n {
		e.hold()
	}
}

func (e *engine) countKeyed(h uint64, ent *entry, p *policy, n int64) {
	if e.mode.Load() == modeStopped {
		return
	}
	v := ent.pending().Add(n)
	if v == n { // first unsent admit since the last flush
		d := &e.dirty[h%dirtyShards]
		d.mu.Lock()
		d.list = append(d.list, dirtyKey{h, ent})
		d.mu.Unlock()
	}
	e.counted(v, n, p)
}

// kick schedules an early flush now unless one is already scheduled.
func (e *engine) kick() {
	if e.kicked.CompareAndSwap(false, true) {
		e.clock.AfterFunc(0, e.onKick)
	}
}

// hold schedules a flush holdFor from now unless one is already scheduled.
func (e *engine) hold() {
	if e.held.CompareAndSwap(false, true) {
		e.clock.AfterFunc(time.Duration(e.holdFor), func() {
			e.held.Store(false)
			e.kick()
		})
	}
}

func closedDecision(p *policy) Decision {
	return Decision{Limit: p.burst, RetryAfter: time.Second, ResetAfter: time.Second, Window: p.window()}
}

func waitDecision(p *policy) Decision {
	return Decision{Limit: p.burst, RetryAfter: time.Duration(minFlushGap), ResetAfter: time.Duration(minFlushGap), Window: p.window()}
}

// ---- timers ----

func (e *engine) onTick() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	now := e.now()
	e.evaluate(now)
	// Resend the last ticks' frames, then send this tick's (always at least
	// a header: it is also the heartbeat that tells peers we are here).
	for i := resendTicks; i >= 1; i-- {
		for _, f := range e.sent[i-1] {
			e.broadcast(f)
		}
	}
	copy(e.sent[1:], e.sent[:resendTicks])
	e.sent[0] = nil
	e.flushLocked(now, true, false)
	e.stopTick = e.clock.AfterFunc(time.Duration(e.tick), e.onTick)
}

func (e *engine) onKick() {
	e.kicked.Store(false)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	now := e.now()
	if wait := e.lastFlush + minFlushGap - now; wait > 0 {
		if e.kicked.CompareAndSwap(false, true) {
			e.clock.AfterFunc(time.Duration(wait), e.onKick)
		}
		return
	}
	e.flushLocked(now, false, false)
}

// flushLocked sends every unsent count, split into frames that fit the
// transport, and keeps them for resending. With heartbeat it sends a bare
// header when there is nothing to count. It returns the frames sent.
func (e *engine) flushLocked(now int64, heartbeat, leaving bool) [][]byte {
	global := e.global.drain(e.l.pol, now)
	batch := e.batch[:0]
	for i := range e.dirty {
		d := &e.dirty[i]
		d.mu.Lock()
		list := d.list
		d.list = nil
		d.mu.Unlock()
		for _, k := range list {
			if n := k.e.pending().Swap(0); n > 0 {
				batch = append(batch, keyCount{k.h, n})
			}
		}
	}
	e.batch = batch[:0]
	reported := uint64(global)
	for _, kc := range batch {
		reported += uint64(kc.tokens)
	}
	e.stats.tokensReported.Add(reported)
	if global == 0 && len(batch) == 0 && !heartbeat && !leaving {
		return nil
	}
	e.lastFlush = now
	e.globalSum += uint64(global)
	// Only keyed entries need numbering and resending: the global total
	// rides in every frame, heartbeats included.
	carries := len(batch) > 0
	var frames [][]byte
	f := frame{leaving: leaving, limiter: e.id, incarnation: e.inc, globalSum: e.globalSum, global: global}
	for first := true; first || len(batch) > 0; first = false {
		// Fill one frame with as many entries as fit.
		room, n := e.maxFrame-headerMax, 0
		for n < len(batch) && room >= entrySize(batch[n]) {
			room -= entrySize(batch[n])
			n++
		}
		f.seq = 0
		if carries {
			e.seq++
			f.seq = e.seq
		}
		b := appendHeader(make([]byte, 0, e.maxFrame-room), &f, n)
		for _, kc := range batch[:n] {
			b = appendEntry(b, kc)
		}
		batch = batch[n:]
		f.global = 0 // the global count rides in the first frame only
		e.broadcast(b)
		frames = append(frames, b)
	}
	if carries {
		e.sent[0] = append(e.sent[0], frames...)
	}
	return frames
}

func (e *engine) broadcast(b []byte) {
	if err := e.t.Broadcast(b); err != nil {
		return // best effort: the resends and the next tick cover it
	}
	e.stats.framesSent.Add(1)
	e.stats.bytesSent.Add(uint64(len(b)))
}

// ---- receiving ----

func (e *engine) receive(from string, b []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	e.stats.framesReceived.Add(1)
	e.stats.bytesReceived.Add(uint64(len(b)))
	f := &e.rx
	if err := decodeFrame(b, f); err != nil {
		e.stats.malformed.Add(1)
		return
	}
	if f.limiter != e.id {
		e.stats.otherLimiter.Add(1)
		return
	}
	now := e.now()
	p := e.peers[from]
	if p == nil {
		p = &peer{}
		e.peers[from] = p
	}
	switch {
	case f.incarnation < p.incarnation:
		e.stats.duplicate.Add(1) // a late frame from before a restart
		return
	case f.incarnation > p.incarnation:
		e.stats.lostPrevious.Add(p.window.missing())
		*p = peer{incarnation: f.incarnation}
	}
	if f.seq == 0 {
		if len(f.keys) > 0 {
			e.stats.malformed.Add(1) // keyed counts must be numbered
			return
		}
	} else if !p.window.accept(f.seq) {
		e.stats.duplicate.Add(1)
		return
	}
	wasVisible := p.heard && now-p.lastHeard <= e.isolation
	p.lastHeard, p.expired, p.heard = now, false, true
	if f.leaving {
		p.departed = true
	}
	e.contact(now, f.incarnation)
	maxDebt := func(pol *policy) int64 {
		if e.floor {
			return 0
		}
		return pol.tolerance
	}
	global := e.globalCharge(p, f, wasVisible)
	charged := uint64(global)
	for _, kc := range f.keys {
		charged += uint64(kc.tokens)
	}
	e.stats.tokensCharged.Add(charged)
	if global > 0 {
		e.global.debit(e.l.pol, now, global, maxDebt(e.l.pol))
	}
	for _, kc := range f.keys {
		pol := e.l.policyFor(kc.key)
		if !e.l.keys.debit(kc.key, pol, now, kc.tokens, maxDebt(pol)) {
			e.stats.keysDropped.Add(1)
		}
	}
}

// globalCharge works out how many of a peer's global admits this frame
// brings that were not charged yet. Normally that is the growth of the
// peer's running total, so a lost frame costs nothing but delay. Two cases
// take only the frame's own delta and start counting from its total:
//   - the first frame from a peer that is older than this node: what it
//     admitted before this node existed is already reflected in a
//     newcomer's empty buckets;
//   - the first frame after the peer was out of sight: while cut off, each
//     side refilled at its share of the rate, so charging the other side's
//     admits from that time would charge them twice and stall the bucket.
//
// The first frame from a peer of the same age or younger brings its whole
// total: it may have admitted before it knew of this node (memberlist
// spreads news of a join by gossip), and those admits are this bucket's too.
func (e *engine) globalCharge(p *peer, f *frame, wasVisible bool) int64 {
	defer func() { p.globalSum, p.synced = max(p.globalSum, f.globalSum), true }()
	switch {
	case !p.synced && f.incarnation+uint64(2*e.interval) >= e.inc:
		return int64(f.globalSum)
	case !p.synced, !wasVisible:
		return f.global
	case f.globalSum > p.globalSum:
		return int64(f.globalSum - p.globalSum)
	}
	return 0
}

// contact runs on every fresh frame. The first one ends the pre-contact
// share; a peer that has been up for a while tells this node that it joined
// a running cluster, whose buckets may be empty: its own replicas start
// empty too instead of bringing a fresh full bucket.
func (e *engine) contact(now int64, peerInc uint64) {
	if !e.contacted {
		e.contacted = true
		e.mode.CompareAndSwap(modePreContact, modeNormal)
	}
	if e.learned || e.floor {
		return
	}
	if peerInc+uint64(2*e.interval) < e.inc {
		e.learned = true
		e.log.Info("joined a running cluster: starting from empty buckets", "node", e.l.name)
		empty := func(tat *atomic.Int64, pol *policy) {
			for {
				old := tat.Load()
				if old == evicted || old >= now+pol.tolerance || tat.CompareAndSwap(old, now+pol.tolerance) {
					return
				}
			}
		}
		e.global.empty(e.l.pol, now)
		e.l.keys.each(func(h uint64, ent *entry) { empty(&ent.tat, e.l.policyFor(h)) })
	}
}

// ---- membership ----

// evaluate works out how much of the cluster is in sight and retunes the
// buckets: known members are the peers heard (or listed by the transport)
// within the grace period that have not left; visible ones were heard within
// the isolation timeout.
func (e *engine) evaluate(now int64) {
	if !e.learned && now-e.startedAt > 2*e.interval {
		e.learned = true // nobody older showed up: a founding member
	}
	if e.mode.Load() == modePreContact && now-e.startedAt > e.isolation {
		e.mode.Store(modeNormal)
	}
	listed := e.t.Members()
	for _, name := range listed {
		if e.peers[name] == nil {
			e.peers[name] = &peer{lastHeard: now}
		}
	}
	visible, known, heard := 1, 1, int64(1)
	for name, p := range e.peers {
		silent := now - p.lastHeard
		if p.departed || silent > e.grace {
			p.expired = true
			if silent > 2*e.grace && !contains(listed, name) {
				e.stats.lostPrevious.Add(p.window.missing())
				delete(e.peers, name)
			}
			continue
		}
		known++
		if silent <= e.isolation || !p.heard && silent <= e.firstContact() {
			visible++
		}
		if p.heard && silent <= e.isolation {
			heard++
		}
	}
	e.stats.heard.Store(heard)
	e.retune(now, visible, known)
}

// firstContact is how long a listed peer that has never been heard still
// counts as in sight.
func (e *engine) firstContact() int64 { return max(int64(2*time.Second), 10*e.interval) }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// retune applies visibility to the policies, the gate and the logs.
func (e *engine) retune(now int64, visible, known int) {
	e.stats.visible.Store(int64(visible))
	e.stats.known.Store(int64(known))
	split := visible < known
	e.l.policies(func(p *policy) {
		unit := p.interval
		if split && e.partition != PartitionFailOpen {
			unit = ceilDiv(p.interval*int64(known), int64(visible))
		}
		p.unit.Store(unit)
		if e.floor {
			return // the reference design has neither cap nor early flush
		}
		flushAt := max(1, p.burst/100)
		p.flushAt.Store(flushAt)
		p.localCap.Store(max(2*flushAt, ceilDiv(p.burst, int64(known))))
	})
	closed := e.partition == PartitionFailClosed && visible == 1 && known > 1
	switch m := e.mode.Load(); {
	case closed && m != modeClosed:
		e.mode.Store(modeClosed)
	case !closed && m == modeClosed:
		e.mode.Store(modeNormal)
	}
	switch {
	case split && (!e.degraded || now-e.lastErrLog >= degradedLogEvery):
		e.degraded, e.lastErrLog = true, now
		e.log.Error("cluster partitioned: some peers are out of reach", "node", e.l.name,
			"visible", visible, "known", known, "policy", e.partition.String(), "admitting", admitting(e.partition, closed, visible, known))
	case !split && e.degraded:
		e.degraded = false
		e.log.Info("cluster whole again: every known peer is in reach", "node", e.l.name, "nodes", known)
	}
}

func admitting(p PartitionPolicy, closed bool, visible, known int) string {
	switch {
	case closed:
		return "nothing (fail-closed)"
	case p == PartitionFailOpen:
		return "the full rate (fail-open)"
	}
	return "a share of the rate: " + strconv.Itoa(visible) + "/" + strconv.Itoa(known)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
