package bucket

import (
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// ShardCount splits the keyed store so that concurrent requests for
// different keys rarely meet on one lock; a key's shard is the low
// ShardBits of its hash.
const (
	ShardBits  = 8
	ShardCount = 1 << ShardBits
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
// PlainEntry (8 bytes: the bucket word) inline in its table's slots; a
// clustered one holds clusterEntry, which adds the count of tokens admitted
// here and not yet sent to peers, behind a pointer in the slot, since the
// engine keeps entries in its lists of unsent counts across a rebuild.
// Each store has one entry type, fixed by its Go type, so no entry is ever
// read as the other kind.
type Entry[E any] interface {
	*E
	// Word is the entry's bucket word (bucket.go).
	Word() *atomic.Int64
	// Busy reports whether the entry holds counts not yet sent to peers, so
	// that a sweep must keep it.
	Busy() bool
}

type PlainEntry struct{ TAT atomic.Int64 }

func (e *PlainEntry) Word() *atomic.Int64 { return &e.TAT }
func (e *PlainEntry) Busy() bool          { return false }

// A PlainEntry is its own slot value (SlotValue): a slot whose word is evicted
// is a tombstone.
func (e *PlainEntry) Entry() *PlainEntry {
	if e.TAT.Load() == Evicted {
		return nil
	}
	return e
}

func (e *PlainEntry) Fill(at Time) *PlainEntry {
	now := int64(at)
	e.TAT.Store(now)
	return e
}

func (e *PlainEntry) MoveTo(dst *PlainEntry) bool {
	t := e.TAT.Swap(Evicted)
	if t == Evicted {
		return false
	}
	dst.TAT.Store(t)
	return true
}

func (e *PlainEntry) Vacate() {}

type PlainStore = Store[PlainEntry, PlainEntry, *PlainEntry, *PlainEntry]

// Store holds one bucket per key hash. A bucket lives while it is not full:
// a full bucket carries no information (a new one starts full), so sweeps
// remove it. The number of live buckets is capped. A key that arrives at
// the cap, when a sweep frees nothing, takes the place of the bucket that
// would be full soonest of a random sample (evict): every key keeps a
// bucket of its own, with its own limit, and a flood of new keys costs
// the buckets nearest full, which hold the least (docs/design.md, "Keys").
type Store[S, E any, PS SlotValue[S, E], P Entry[E]] struct {
	shards  [ShardCount]Shard[S, E, PS]
	live    atomic.Int64
	maxKeys int64
	// evictions counts buckets evicted at the cap to make room; ghosts
	// keep their debts (ghosts.go).
	evictions atomic.Uint64
	ghosts    Ghosts
	log       *slog.Logger // for the WARN at the cap; nil: none
	lastWarn  atomic.Int64 // request time of the last one, +1
	// ruleOf is a key hash's rule, to price a bucket's debt in tokens.
	ruleOf func(h uint64) *Rule

	sweepMu       sync.Mutex
	lastFullSweep int64 // guarded by sweepMu
}

// Shard is one part of the store. Lookups read its table without a lock;
// inserts and sweeps take mu.
type Shard[S, E any, PS SlotValue[S, E]] struct {
	mu        sync.Mutex
	t         KeyTable[S, E, PS]
	nextSweep int64 // guarded by mu
	// Pad to a cache line so that a neighbouring shard's writers do not
	// disturb this one's readers.
	_ [24]byte
}

func NewStore[S, E any, PS SlotValue[S, E], P Entry[E]](maxKeys int64, log *slog.Logger, ruleOf func(uint64) *Rule) *Store[S, E, PS, P] {
	s := &Store[S, E, PS, P]{maxKeys: maxKeys, log: log, ruleOf: ruleOf}
	for i := range s.shards {
		s.shards[i].nextSweep = NeverUsed
	}
	s.lastFullSweep = NeverUsed
	return s
}

func NewPlainStore(maxKeys int64, log *slog.Logger, ruleOf func(uint64) *Rule) *PlainStore {
	return NewStore[PlainEntry, PlainEntry, *PlainEntry, *PlainEntry](maxKeys, log, ruleOf)
}

func (s *Store[S, E, PS, P]) shardFor(h uint64) *Shard[S, E, PS] { return &s.shards[h&(ShardCount-1)] }

// Take spends n tokens of the bucket for key hash h, deciding into d.
func (s *Store[S, E, PS, P]) Take(d *render.Decision, h uint64, rule *Rule, at Time, n int64) {
	for {
		e := P(s.Get(h, at))
		if e == nil {
			*d = NoRoom(rule, 0)
			return
		}
		if TakeInto(d, e.Word(), rule, at, n) {
			return
		}
		// The entry was evicted between lookup and take: look again.
	}
}

// NoRoom denies a key the store found no room for (every bucket
// it sampled held counts not yet sent to peers): for wait, when they will
// have gone. It never admits: a key without a bucket has no limit to
// admit against.
func NoRoom(rule *Rule, wait int64) render.Decision {
	return render.Decision{BucketSize: rule.BucketSize, RetryAfter: time.Duration(max(wait, 1)), ResetAfter: time.Duration(max(wait, 1)), Window: rule.Window()}
}

// Get returns the live entry for h, creating it, or nil when the store is
// at its cap and has no room to make (see insert).
func (s *Store[S, E, PS, P]) Get(h uint64, at Time) *E {
	sh := s.shardFor(h)
	e := sh.t.Get(h)
	if e == nil {
		e = s.insert(sh, h, at)
	}
	return e
}

// Debit charges n tokens to the bucket for h (a peer's admits, or a
// charge of this node's own), creating it if needed, and returns its entry
// with what debit in bucket.go returns; a nil entry when the store is at
// its cap and the count was dropped.
func (s *Store[S, E, PS, P]) Debit(h uint64, rule *Rule, at Time, n, maxDebt int64) (e *E, charged, ahead int64) {
	for {
		e := s.Get(h, at)
		if e == nil {
			return nil, 0, 0
		}
		w := P(e).Word()
		if w.Load() != Evicted {
			charged, ahead = Debit(w, rule, at, n, maxDebt)
			if w.Load() != Evicted {
				return e, charged, ahead
			}
		}
	}
}

// Lookup returns the live entry for h, or nil. An inline entry can move
// to a new array at any moment, leaving a tombstone: change one through
// with instead.
func (s *Store[S, E, PS, P]) Lookup(h uint64) *E { return s.shardFor(h).t.Get(h) }

// With calls f with h's live entry, if it has one, under its shard's lock,
// so that no rebuild moves the entry while f reads or changes it.
func (s *Store[S, E, PS, P]) With(h uint64, f func(e *E)) {
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.t.Get(h); e != nil {
		f(e)
	}
}

// Each calls f for every live entry, one shard at a time, each under its
// lock (see with).
func (s *Store[S, E, PS, P]) Each(f func(h uint64, e *E)) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.t.Each(f)
		sh.mu.Unlock()
	}
}

// insert returns the live entry for h, creating a full one. At the cap it
// sweeps (at most every pressureSweepGap), and when that frees no room it
// evicts a bucket to make some. It returns nil only when every bucket the
// eviction sampled holds counts not yet sent to peers (clustered, under a
// flood of new keys faster than a flush) and the store is an eighth over
// its cap already.
func (s *Store[S, E, PS, P]) insert(sh *Shard[S, E, PS], h uint64, at Time) *E {
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
	s.ghosts.Keep(h, int64(start), int64(at), s.ruleOf(h).Interval, ghostCells(s.maxKeys))
	return nil
}

// insertInPlace inserts h, its bucket starting at start, into the place an
// eviction freed: the count of live keys is not changed, so that no other
// insert takes the place in between. A key that is already there
// (inserted meanwhile) gives the place back, and its ghost's debt to its
// bucket.
func (s *Store[S, E, PS, P]) insertInPlace(sh *Shard[S, E, PS], h uint64, at, start Time) *E {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.t.Get(h); e != nil {
		s.live.Add(-1)
		if start > at {
			for w := P(e).Word(); ; {
				t := w.Load()
				if t == Evicted || t >= int64(start) || w.CompareAndSwap(t, int64(start)) {
					break
				}
			}
		}
		return e
	}
	return sh.t.Put(h, start)
}

// evict removes the bucket of a random sample that owes the fewest tokens
// (each priced by its own rule), skipping buckets with counts not yet
// sent, and reports whether it removed one. Its place stays counted in
// live, for the caller's insertInPlace. Its debt goes to a ghost, which a
// return of the key takes back; were the ghost lost too, the key would
// start again from a full bucket of its own limit, as a swept key does.
func (s *Store[S, E, PS, P]) evict(at Time) bool {
	var victim struct {
		sh   *Shard[S, E, PS]
		h    uint64
		debt int64 // tokens
	}
	now := int64(at)
	found := false
	first, sampled := rand.IntN(ShardCount), 0
	for i := 0; i < ShardCount && sampled < evictSample; i++ {
		sh := &s.shards[(first+i)%ShardCount]
		sh.mu.Lock()
		sampled += sh.t.sample(rand.Uint64(), evictPerShard, func(k uint64, e *E) {
			t := P(e).Word().Load()
			if t == Evicted || P(e).Busy() {
				return
			}
			if debt := max(t-now, 0) / s.ruleOf(k).Interval; !found || debt < victim.debt {
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
	e := sh.t.Get(victim.h)
	if e == nil || P(e).Busy() {
		return false
	}
	w := P(e).Word()
	t := w.Load()
	for t == Evicted || !w.CompareAndSwap(t, Evicted) {
		if t == Evicted {
			return false
		}
		t = w.Load()
	}
	sh.t.Remove(victim.h)
	s.ghosts.Keep(victim.h, t, now, s.ruleOf(victim.h).Interval, ghostCells(s.maxKeys))
	n := s.evictions.Add(1)
	s.warnEvicted(at, n)
	return true
}

// warnEvicted says, at most every evictWarnEvery of request time, that the
// cap is evicting buckets.
func (s *Store[S, E, PS, P]) warnEvicted(at Time, n uint64) {
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

func (s *Store[S, E, PS, P]) tryInsert(sh *Shard[S, E, PS], h uint64, at Time) (e *E, full bool) {
	now := int64(at)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.t.Get(h); e != nil {
		return e, false
	}
	if now >= sh.nextSweep {
		s.sweepLocked(sh, at)
	}
	if s.live.Load() >= s.maxKeys {
		return nil, true
	}
	e = sh.t.Put(h, s.startOf(h, at))
	s.live.Add(1)
	return e, false
}

// startOf is the time a new bucket for h begins at: full at at, unless h
// was evicted owing tokens (its ghost's TAT).
func (s *Store[S, E, PS, P]) startOf(h uint64, at Time) Time {
	return Time(s.ghosts.Start(h, int64(at)))
}

// pressureSweep sweeps the whole store when the cap is reached, at most once
// per pressureSweepGap and by one goroutine at a time, so that a flood of
// new keys cannot make every request scan the store. It reports whether it
// swept.
func (s *Store[S, E, PS, P]) pressureSweep(at Time) bool {
	now := int64(at)
	if !s.sweepMu.TryLock() {
		return false
	}
	defer s.sweepMu.Unlock()
	if now-s.lastFullSweep < pressureSweepGap {
		return false
	}
	s.lastFullSweep = now
	s.Sweep(at)
	return true
}

// LiveAt counts the buckets that are not full at at (or hold counts not
// yet sent), for Stats: a shard drops its full buckets only when it takes
// a new key, so the buckets it holds are not all live. It reads, and
// changes nothing: at is the reader's clock, which need not be the one
// the store's callers decide on.
func (s *Store[S, E, PS, P]) LiveAt(at Time) int64 {
	now := int64(at)
	var n int64
	s.Each(func(_ uint64, e *E) {
		if t := P(e).Word().Load(); t > now && t != Evicted || P(e).Busy() {
			n++
		}
	})
	return n
}

// sweepLocked drops the shard's full buckets. A bucket is claimed by
// swapping its state for the evicted mark, so a concurrent taker that still
// holds the entry retries on a fresh one instead of spending on a dead one.
// A bucket with unsent admits stays until the engine has sent them.
func (s *Store[S, E, PS, P]) sweepLocked(sh *Shard[S, E, PS], at Time) {
	now := int64(at)
	sh.nextSweep = now + sweepInterval
	var dropped int64
	sh.t.Each(func(k uint64, e *E) {
		w := P(e).Word()
		if t := w.Load(); t <= now && !P(e).Busy() && w.CompareAndSwap(t, Evicted) {
			sh.t.Remove(k)
			dropped++
		}
	})
	s.live.Add(-dropped)
}

// Sweep drops every full bucket in the store.
func (s *Store[S, E, PS, P]) Sweep(at Time) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		s.sweepLocked(sh, at)
		sh.mu.Unlock()
	}
}

func (s *Store[S, E, PS, P]) Len() int64 { return s.live.Load() }

// EvictedCount is the number of buckets evicted at the cap.
func (s *Store[S, E, PS, P]) EvictedCount() uint64 { return s.evictions.Load() }
