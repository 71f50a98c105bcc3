package gopherpace

import (
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// shardCount splits the keyed store so that concurrent requests for
// different keys rarely meet on one lock; a key's shard is the low
// shardBits of its hash.
const (
	shardBits  = 8
	shardCount = 1 << shardBits
)

const (
	// sweepInterval is how often (in request time) a shard that is taking
	// new keys drops its idle buckets.
	sweepInterval = int64(time.Second)
	// pressureSweepGap spaces out the extra sweeps made when the key cap is
	// reached, so that a flood of new keys cannot make every request scan a
	// shard.
	pressureSweepGap = int64(100 * time.Millisecond)
	// evictSample and evictPerShard are the sample an eviction picks its
	// victim from: this many live buckets, at most evictPerShard from each
	// shard, the shards from a random one on.
	evictSample, evictPerShard = 16, 4
	// evictWarnEvery spaces the WARN records of evictions.
	evictWarnEvery = int64(30 * time.Second)
)

// An entry is the state of one keyed bucket. A standalone store holds
// plainEntry (8 bytes: the bucket word) inline in its table's slots; a
// clustered one holds clusterEntry, which adds the count of tokens admitted
// here and not yet sent to peers, behind a pointer in the slot, since the
// engine keeps entries in its lists of unsent counts across a rebuild.
// Each store has one entry type, fixed by its Go type, so no entry is ever
// read as the other kind.
type entry[E any] interface {
	*E
	// word is the entry's bucket word (bucket.go).
	word() *atomic.Int64
	// busy reports whether the entry holds counts not yet sent to peers, so
	// that a sweep must keep it.
	busy() bool
}

type plainEntry struct{ tat atomic.Int64 }

func (e *plainEntry) word() *atomic.Int64 { return &e.tat }
func (e *plainEntry) busy() bool          { return false }

// A plainEntry is its own slot value (slotValue): a slot whose word is evicted
// is a tombstone.
func (e *plainEntry) entry() *plainEntry {
	if e.tat.Load() == evicted {
		return nil
	}
	return e
}

func (e *plainEntry) fill(at bucketTime) *plainEntry {
	now := int64(at)
	e.tat.Store(now)
	return e
}

func (e *plainEntry) moveTo(dst *plainEntry) bool {
	t := e.tat.Swap(evicted)
	if t == evicted {
		return false
	}
	dst.tat.Store(t)
	return true
}

func (e *plainEntry) vacate() {}

type clusterEntry struct {
	tat      atomic.Int64
	pending  atomic.Int64 // admitted here, not yet sent
	inflight atomic.Int64 // sent within the last reportFlight (decide_clustered.go)
	// fair is the key's share while it is hot (key_shares.go); nil
	// otherwise.
	fair atomic.Pointer[keyShare]
}

func (e *clusterEntry) word() *atomic.Int64 { return &e.tat }

// addPending counts n tokens admitted here for the next report, and
// returns the count now pending; takePending hands the count to a flush.
// addInflight counts n tokens reported and not yet surely heard (n < 0:
// heard). Lock-free: the request path and the sender call them.
func (e *clusterEntry) addPending(n int64) int64 { return e.pending.Add(n) }
func (e *clusterEntry) takePending() int64       { return e.pending.Swap(0) }
func (e *clusterEntry) addInflight(n int64)      { e.inflight.Add(n) }

// attachShare makes k the key's share while it is hot; dropShare
// detaches it, unless another has taken its place (key_shares.go).
func (e *clusterEntry) attachShare(k *keyShare) {
	if e.fair.Load() != k {
		e.fair.Store(k)
	}
}
func (e *clusterEntry) dropShare(k *keyShare) { e.fair.CompareAndSwap(k, nil) }

func (e *clusterEntry) busy() bool { return e.pending.Load() != 0 || e.inflight.Load() != 0 }

// clusterSlot is a clustered table's slot value (slotValue): a tombstone holds
// nil.
type clusterSlot struct{ p atomic.Pointer[clusterEntry] }

func (s *clusterSlot) entry() *clusterEntry { return s.p.Load() }

func (s *clusterSlot) fill(at bucketTime) *clusterEntry {
	e := new(clusterEntry)
	e.tat.Store(int64(at))
	s.p.Store(e)
	return e
}

func (s *clusterSlot) moveTo(dst *clusterSlot) bool {
	e := s.p.Load()
	dst.p.Store(e)
	return e != nil
}

func (s *clusterSlot) vacate() { s.p.Store(nil) }

type (
	plainStore   = store[plainEntry, plainEntry, *plainEntry, *plainEntry]
	clusterStore = store[clusterSlot, clusterEntry, *clusterSlot, *clusterEntry]
)

// store holds one bucket per key hash. A bucket lives while it is not full:
// a full bucket carries no information (a new one starts full), so sweeps
// remove it. The number of live buckets is capped. A key that arrives at
// the cap, when a sweep frees nothing, takes the place of the bucket that
// would be full soonest of a random sample (evict): every key keeps a
// bucket of its own, with its own limit, and a flood of new keys costs
// the buckets nearest full, which hold the least (docs/design.md, "Keys").
type store[S, E any, PS slotValue[S, E], P entry[E]] struct {
	shards  [shardCount]shard[S, E, PS]
	live    atomic.Int64
	maxKeys int64
	// evictions counts buckets evicted at the cap to make room; ghosts
	// keep their debts (ghosts.go).
	evictions atomic.Uint64
	ghosts    ghosts
	log       *slog.Logger // for the WARN at the cap; nil: none
	lastWarn  atomic.Int64 // request time of the last one, +1
	// ruleOf is a key hash's rule, to price a bucket's debt in tokens.
	ruleOf func(h uint64) *rule

	sweepMu       sync.Mutex
	lastFullSweep int64 // guarded by sweepMu
}

// shard is one part of the store. Lookups read its table without a lock;
// inserts and sweeps take mu.
type shard[S, E any, PS slotValue[S, E]] struct {
	mu        sync.Mutex
	t         keyTable[S, E, PS]
	nextSweep int64 // guarded by mu
	// Pad to a cache line so that a neighbouring shard's writers do not
	// disturb this one's readers.
	_ [24]byte
}

func newStore[S, E any, PS slotValue[S, E], P entry[E]](maxKeys int64, log *slog.Logger, ruleOf func(uint64) *rule) *store[S, E, PS, P] {
	s := &store[S, E, PS, P]{maxKeys: maxKeys, log: log, ruleOf: ruleOf}
	for i := range s.shards {
		s.shards[i].nextSweep = neverUsed
	}
	s.lastFullSweep = neverUsed
	return s
}

func newPlainStore(maxKeys int64, log *slog.Logger, ruleOf func(uint64) *rule) *plainStore {
	return newStore[plainEntry, plainEntry, *plainEntry, *plainEntry](maxKeys, log, ruleOf)
}

func newClusterStore(maxKeys int64, log *slog.Logger, ruleOf func(uint64) *rule) *clusterStore {
	return newStore[clusterSlot, clusterEntry, *clusterSlot, *clusterEntry](maxKeys, log, ruleOf)
}

func (s *store[S, E, PS, P]) shardFor(h uint64) *shard[S, E, PS] { return &s.shards[h&(shardCount-1)] }

// take spends n tokens of the bucket for key hash h, deciding into d.
func (s *store[S, E, PS, P]) take(d *Decision, h uint64, rule *rule, at bucketTime, n int64) {
	for {
		e := P(s.get(h, at))
		if e == nil {
			*d = noRoomDecision(rule, 0)
			return
		}
		if takeInto(d, e.word(), rule, at, n) {
			return
		}
		// The entry was evicted between lookup and take: look again.
	}
}

// noRoomDecision denies a key the store found no room for (every bucket
// it sampled held counts not yet sent to peers): for wait, when they will
// have gone. It never admits: a key without a bucket has no limit to
// admit against.
func noRoomDecision(rule *rule, wait int64) Decision {
	return Decision{BucketSize: rule.bucketSize, RetryAfter: time.Duration(max(wait, 1)), ResetAfter: time.Duration(max(wait, 1)), Window: rule.window()}
}

// get returns the live entry for h, creating it, or nil when the store is
// at its cap and has no room to make (see insert).
func (s *store[S, E, PS, P]) get(h uint64, at bucketTime) *E {
	sh := s.shardFor(h)
	e := sh.t.get(h)
	if e == nil {
		e = s.insert(sh, h, at)
	}
	return e
}

// debit charges n tokens to the bucket for h (a peer's admits, or a
// charge of this node's own), creating it if needed, and returns its entry
// with what debit in bucket.go returns; a nil entry when the store is at
// its cap and the count was dropped.
func (s *store[S, E, PS, P]) debit(h uint64, rule *rule, at bucketTime, n, maxDebt int64) (e *E, charged, ahead int64) {
	for {
		e := s.get(h, at)
		if e == nil {
			return nil, 0, 0
		}
		w := P(e).word()
		if w.Load() != evicted {
			charged, ahead = debit(w, rule, at, n, maxDebt)
			if w.Load() != evicted {
				return e, charged, ahead
			}
		}
	}
}

// lookup returns the live entry for h, or nil. An inline entry can move
// to a new array at any moment, leaving a tombstone: change one through
// with instead.
func (s *store[S, E, PS, P]) lookup(h uint64) *E { return s.shardFor(h).t.get(h) }

// with calls f with h's live entry, if it has one, under its shard's lock,
// so that no rebuild moves the entry while f reads or changes it.
func (s *store[S, E, PS, P]) with(h uint64, f func(e *E)) {
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.t.get(h); e != nil {
		f(e)
	}
}

// each calls f for every live entry, one shard at a time, each under its
// lock (see with).
func (s *store[S, E, PS, P]) each(f func(h uint64, e *E)) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.t.each(f)
		sh.mu.Unlock()
	}
}

// insert returns the live entry for h, creating a full one. At the cap it
// sweeps (at most every pressureSweepGap), and when that frees no room it
// evicts a bucket to make some. It returns nil only when every bucket the
// eviction sampled holds counts not yet sent to peers (clustered, under a
// flood of new keys faster than a flush) and the store is an eighth over
// its cap already.
func (s *store[S, E, PS, P]) insert(sh *shard[S, E, PS], h uint64, at bucketTime) *E {
	if e, full := s.tryInsert(sh, h, at); !full {
		return e
	}
	if s.pressureSweep(at) {
		if e, full := s.tryInsert(sh, h, at); !full {
			return e
		}
	}
	// The key's own ghost first: the eviction's may take its cell.
	start := s.startOf(h, at)
	if s.evict(at) {
		return s.insertInPlace(sh, h, at, start)
	}
	if s.live.Load() < s.maxKeys+s.maxKeys/8 {
		s.live.Add(1)
		return s.insertInPlace(sh, h, at, start)
	}
	s.ghosts.keep(h, int64(start), int64(at), s.ruleOf(h).interval, ghostCells(s.maxKeys))
	return nil
}

// insertInPlace inserts h, its bucket starting at start, into the place an
// eviction freed: the count of live keys is not changed, so that no other
// insert takes the place in between. A key that is already there
// (inserted meanwhile) gives the place back, and its ghost's debt to its
// bucket.
func (s *store[S, E, PS, P]) insertInPlace(sh *shard[S, E, PS], h uint64, at, start bucketTime) *E {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.t.get(h); e != nil {
		s.live.Add(-1)
		if start > at {
			for w := P(e).word(); ; {
				t := w.Load()
				if t == evicted || t >= int64(start) || w.CompareAndSwap(t, int64(start)) {
					break
				}
			}
		}
		return e
	}
	return sh.t.put(h, start)
}

// evict removes the bucket of a random sample that owes the fewest tokens
// (each priced by its own rule), skipping buckets with counts not yet
// sent, and reports whether it removed one. Its place stays counted in
// live, for the caller's insertInPlace. Its debt goes to a ghost, which a
// return of the key takes back; were the ghost lost too, the key would
// start again from a full bucket of its own limit, as a swept key does.
func (s *store[S, E, PS, P]) evict(at bucketTime) bool {
	var victim struct {
		sh   *shard[S, E, PS]
		h    uint64
		debt int64 // tokens
	}
	now := int64(at)
	found := false
	first, sampled := rand.IntN(shardCount), 0
	for i := 0; i < shardCount && sampled < evictSample; i++ {
		sh := &s.shards[(first+i)%shardCount]
		sh.mu.Lock()
		sampled += sh.t.sample(rand.Uint64(), evictPerShard, func(k uint64, e *E) {
			t := P(e).word().Load()
			if t == evicted || P(e).busy() {
				return
			}
			if debt := max(t-now, 0) / s.ruleOf(k).interval; !found || debt < victim.debt {
				victim.sh, victim.h, victim.debt, found = sh, k, debt, true
			}
		})
		sh.mu.Unlock()
	}
	if !found {
		return false
	}
	sh := victim.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.t.get(victim.h)
	if e == nil || P(e).busy() {
		return false
	}
	w := P(e).word()
	t := w.Load()
	for t == evicted || !w.CompareAndSwap(t, evicted) {
		if t == evicted {
			return false
		}
		t = w.Load()
	}
	sh.t.remove(victim.h)
	s.ghosts.keep(victim.h, t, now, s.ruleOf(victim.h).interval, ghostCells(s.maxKeys))
	n := s.evictions.Add(1)
	s.warnEvicted(at, n)
	return true
}

// warnEvicted says, at most every evictWarnEvery of request time, that the
// cap is evicting buckets.
func (s *store[S, E, PS, P]) warnEvicted(at bucketTime, n uint64) {
	if s.log == nil {
		return
	}
	now := int64(at) + 1 // 0 is never
	last := s.lastWarn.Load()
	if last != 0 && now-last < evictWarnEvery || !s.lastWarn.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("the key cap is reached: buckets are evicted to make room for new keys, those owing the fewest tokens first, their debts kept in ghosts. Raise WithMaxKeys if these are real clients",
		"cap", s.maxKeys, "evicted so far", n)
}

func (s *store[S, E, PS, P]) tryInsert(sh *shard[S, E, PS], h uint64, at bucketTime) (e *E, full bool) {
	now := int64(at)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.t.get(h); e != nil {
		return e, false
	}
	if now >= sh.nextSweep {
		s.sweepLocked(sh, at)
	}
	if s.live.Load() >= s.maxKeys {
		return nil, true
	}
	e = sh.t.put(h, s.startOf(h, at))
	s.live.Add(1)
	return e, false
}

// startOf is the time a new bucket for h begins at: full at at, unless h
// was evicted owing tokens (its ghost's TAT).
func (s *store[S, E, PS, P]) startOf(h uint64, at bucketTime) bucketTime {
	return bucketTime(s.ghosts.start(h, int64(at)))
}

// pressureSweep sweeps the whole store when the cap is reached, at most once
// per pressureSweepGap and by one goroutine at a time, so that a flood of
// new keys cannot make every request scan the store. It reports whether it
// swept.
func (s *store[S, E, PS, P]) pressureSweep(at bucketTime) bool {
	now := int64(at)
	if !s.sweepMu.TryLock() {
		return false
	}
	defer s.sweepMu.Unlock()
	if now-s.lastFullSweep < pressureSweepGap {
		return false
	}
	s.lastFullSweep = now
	s.sweep(at)
	return true
}

// liveAt counts the buckets that are not full at at (or hold counts not
// yet sent), for Stats: a shard drops its full buckets only when it takes
// a new key, so the buckets it holds are not all live. It reads, and
// changes nothing: at is the reader's clock, which need not be the one
// the store's callers decide on.
func (s *store[S, E, PS, P]) liveAt(at bucketTime) int64 {
	now := int64(at)
	var n int64
	s.each(func(_ uint64, e *E) {
		if t := P(e).word().Load(); t > now && t != evicted || P(e).busy() {
			n++
		}
	})
	return n
}

// sweepLocked drops the shard's full buckets. A bucket is claimed by
// swapping its state for the evicted mark, so a concurrent taker that still
// holds the entry retries on a fresh one instead of spending on a dead one.
// A bucket with unsent admits stays until the engine has sent them.
func (s *store[S, E, PS, P]) sweepLocked(sh *shard[S, E, PS], at bucketTime) {
	now := int64(at)
	sh.nextSweep = now + sweepInterval
	var dropped int64
	sh.t.each(func(k uint64, e *E) {
		w := P(e).word()
		if t := w.Load(); t <= now && !P(e).busy() && w.CompareAndSwap(t, evicted) {
			sh.t.remove(k)
			dropped++
		}
	})
	s.live.Add(-dropped)
}

// sweep drops every full bucket in the store.
func (s *store[S, E, PS, P]) sweep(at bucketTime) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		s.sweepLocked(sh, at)
		sh.mu.Unlock()
	}
}

func (s *store[S, E, PS, P]) len() int64 { return s.live.Load() }

// evictedCount is the number of buckets evicted at the cap.
func (s *store[S, E, PS, P]) evictedCount() uint64 { return s.evictions.Load() }
