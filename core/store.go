package gopherpace

import (
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
)

// An entry is the state of one keyed bucket. A standalone store holds
// plainEntry (8 bytes: the bucket word); a clustered one holds clusterEntry,
// which adds the count of tokens admitted here and not yet sent to peers.
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

type clusterEntry struct {
	tat      atomic.Int64
	pending  atomic.Int64 // admitted here, not yet sent
	inflight atomic.Int64 // sent within the last reportFlight (count.go)
}

func (e *clusterEntry) word() *atomic.Int64 { return &e.tat }
func (e *clusterEntry) busy() bool          { return e.pending.Load() != 0 || e.inflight.Load() != 0 }

type (
	plainStore   = store[plainEntry, *plainEntry]
	clusterStore = store[clusterEntry, *clusterEntry]
)

// store holds one bucket per key hash. A bucket lives while it is not full:
// a full bucket carries no information (a new one starts full), so sweeps
// remove it. The number of live buckets is capped; a key that arrives while
// the store is at its cap shares one overflow bucket with every other such
// key, so a flood of random keys is limited as if it were a single client
// and never displaces the buckets of keys already being limited.
type store[E any, P entry[E]] struct {
	shards   [shardCount]shard[E]
	live     atomic.Int64
	maxKeys  int64
	overflow bucket
	// overflowed counts decisions made on the overflow bucket.
	overflowed atomic.Uint64

	sweepMu       sync.Mutex
	lastFullSweep int64 // guarded by sweepMu
}

// shard is one part of the store. Lookups read its table without a lock;
// inserts and sweeps take mu.
type shard[E any] struct {
	mu        sync.Mutex
	t         keyTable[E]
	nextSweep int64 // guarded by mu
	// Pad to a cache line so that a neighbouring shard's writers do not
	// disturb this one's readers.
	_ [24]byte
}

func newStore[E any, P entry[E]](maxKeys int64) *store[E, P] {
	s := &store[E, P]{maxKeys: maxKeys}
	for i := range s.shards {
		s.shards[i].nextSweep = neverUsed
	}
	s.overflow.init()
	s.lastFullSweep = neverUsed
	return s
}

func (s *store[E, P]) shardFor(h uint64) *shard[E] { return &s.shards[h&(shardCount-1)] }

// take spends n tokens of the bucket for key hash h, deciding into d.
func (s *store[E, P]) take(d *Decision, h uint64, p *policy, now, n int64) {
	for {
		e := P(s.get(h, now))
		if e == nil {
			s.takeOverflow(d, p, now, n)
			return
		}
		if takeInto(d, e.word(), p, now, n) {
			return
		}
		// The entry was evicted between lookup and take: look again.
	}
}

// takeOverflow decides on the bucket shared by keys that found the store
// at its cap.
func (s *store[E, P]) takeOverflow(d *Decision, p *policy, now, n int64) {
	s.overflowed.Add(1)
	takeInto(d, &s.overflow.tat, p, now, n)
}

// get returns the live entry for h, creating it, or nil at the cap.
func (s *store[E, P]) get(h uint64, now int64) *E {
	sh := s.shardFor(h)
	e := sh.t.get(h)
	if e == nil {
		e = s.insert(sh, h, now)
	}
	return e
}

// debit charges a peer's admits to the bucket for h, creating it if needed.
// It reports false when the store is at its cap and the count was dropped.
func (s *store[E, P]) debit(h uint64, p *policy, now, n, maxDebt int64) bool {
	for {
		e := P(s.get(h, now))
		if e == nil {
			return false
		}
		w := e.word()
		if w.Load() != evicted {
			debit(w, p, now, n, maxDebt)
			if w.Load() != evicted {
				return true
			}
		}
	}
}

// lookup returns the live entry for h, or nil.
func (s *store[E, P]) lookup(h uint64) *E { return s.shardFor(h).t.get(h) }

// each calls f for every live entry, one shard at a time.
func (s *store[E, P]) each(f func(h uint64, e *E)) {
	for i := range s.shards {
		s.shards[i].t.each(f)
	}
}

// insert returns the live entry for h, creating a full one, or nil when the
// store is at its cap and sweeping idle buckets freed no room.
func (s *store[E, P]) insert(sh *shard[E], h uint64, now int64) *E {
	if e, full := s.tryInsert(sh, h, now); !full {
		return e
	}
	if !s.pressureSweep(now) {
		return nil
	}
	e, _ := s.tryInsert(sh, h, now)
	return e
}

func (s *store[E, P]) tryInsert(sh *shard[E], h uint64, now int64) (e *E, full bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.t.get(h); e != nil {
		return e, false
	}
	if now >= sh.nextSweep {
		s.sweepLocked(sh, now)
	}
	if s.live.Load() >= s.maxKeys {
		return nil, true
	}
	e = new(E)
	P(e).word().Store(now)
	sh.t.put(h, e)
	s.live.Add(1)
	return e, false
}

// pressureSweep sweeps the whole store when the cap is reached, at most once
// per pressureSweepGap and by one goroutine at a time, so that a flood of
// new keys cannot make every request scan the store. It reports whether it
// swept.
func (s *store[E, P]) pressureSweep(now int64) bool {
	if !s.sweepMu.TryLock() {
		return false
	}
	defer s.sweepMu.Unlock()
	if now-s.lastFullSweep < pressureSweepGap {
		return false
	}
	s.lastFullSweep = now
	s.sweep(now)
	return true
}

// sweepLocked drops the shard's full buckets. A bucket is claimed by
// swapping its state for the evicted mark, so a concurrent taker that still
// holds the entry retries on a fresh one instead of spending on a dead one.
// A bucket with unsent admits stays until the engine has sent them.
func (s *store[E, P]) sweepLocked(sh *shard[E], now int64) {
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
func (s *store[E, P]) sweep(now int64) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		s.sweepLocked(sh, now)
		sh.mu.Unlock()
	}
}

func (s *store[E, P]) len() int64 { return s.live.Load() }

// overflowCount is the number of decisions made on the overflow bucket.
func (s *store[E, P]) overflowCount() uint64 { return s.overflowed.Load() }
