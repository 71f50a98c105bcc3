package gopherpace

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// shardCount splits the keyed store so that concurrent requests for
// different keys rarely meet on one lock. A power of two.
const shardCount = 256

const (
	// sweepInterval is how often (in request time) a shard that is taking
	// new keys drops its idle buckets.
	sweepInterval = int64(time.Second)
	// pressureSweepGap spaces out the extra sweeps made when the key cap is
	// reached, so that a flood of new keys cannot make every request scan a
	// shard.
	pressureSweepGap = int64(100 * time.Millisecond)
)

// store holds one bucket per key hash. A bucket lives while it is not full:
// a full bucket carries no information (a new one starts full), so sweeps
// remove it. The number of live buckets is capped; a key that arrives while
// the store is at its cap shares one overflow bucket with every other such
// key, so a flood of random keys is limited as if it were a single client
// and never displaces the buckets of keys already being limited.
type store struct {
	shards    [shardCount]shard
	clustered bool // entries are clusterEntry
	live      atomic.Int64
	maxKeys   int64
	overflow  bucket
	// overflowed counts decisions made on the overflow bucket.
	overflowed atomic.Uint64

	sweepMu       sync.Mutex
	lastFullSweep int64 // guarded by sweepMu
}

// shard is one part of the store. Lookups read its table without a lock;
// inserts and sweeps take mu.
type shard struct {
	mu        sync.Mutex
	t         keyTable
	nextSweep int64 // guarded by mu
	// Pad to a cache line so that a neighbouring shard's writers do not
	// disturb this one's readers.
	_ [24]byte
}

// entry is the state of one keyed bucket: its theoretical arrival time.
// A clustered store allocates clusterEntry instead, which adds the count of
// tokens admitted here and not yet sent to peers; standalone keys so cost 8
// bytes instead of 16.
type entry struct {
	tat atomic.Int64
}

type clusterEntry struct {
	entry
	pending atomic.Int64
}

// pending returns the unsent count of an entry of a clustered store. Only a
// clustered store calls it, and it allocates every entry as a clusterEntry
// whose first field is the entry, so the conversion is sound.
func (e *entry) pending() *atomic.Int64 {
	return &(*clusterEntry)(unsafe.Pointer(e)).pending
}

func newStore(maxKeys int64, clustered bool) *store {
	s := &store{maxKeys: maxKeys, clustered: clustered}
	for i := range s.shards {
		s.shards[i].nextSweep = neverUsed
	}
	s.overflow.init()
	s.lastFullSweep = neverUsed
	return s
}

func (s *store) shardFor(h uint64) *shard { return &s.shards[h&(shardCount-1)] }

// take spends n tokens of the bucket for key hash h. With an engine, the
// admit is counted for gossip and held to the engine's local cap.
func (s *store) take(d *Decision, h uint64, p *policy, now, n int64, eng *engine) {
	sh := s.shardFor(h)
	for {
		e := s.get(sh, h, now)
		if e == nil {
			s.overflowed.Add(1)
			takeInto(d, &s.overflow.tat, p, now, n)
			return
		}
		if eng != nil {
			if cd, capped := eng.overCap(e.pending().Load(), p, n); capped {
				*d = cd
				return
			}
		}
		if takeInto(d, &e.tat, p, now, n) {
			if d.Allowed && eng != nil {
				eng.countKeyed(h, e, p, n)
			}
			return
		}
		// The entry was evicted between lookup and take: look again.
	}
}

// get returns the live entry for h, creating it, or nil at the cap.
func (s *store) get(sh *shard, h uint64, now int64) *entry {
	e := sh.t.get(h)
	if e == nil {
		e = s.insert(sh, h, now)
	}
	return e
}

// debit charges a peer's admits to the bucket for h, creating it if needed.
// It reports false when the store is at its cap and the count was dropped.
func (s *store) debit(h uint64, p *policy, now, n, maxDebt int64) bool {
	sh := s.shardFor(h)
	for {
		e := s.get(sh, h, now)
		if e == nil {
			return false
		}
		if e.tat.Load() != evicted {
			debit(&e.tat, p, now, n, maxDebt)
			if e.tat.Load() != evicted {
				return true
			}
		}
	}
}

// lookup returns the live entry for h, or nil.
func (s *store) lookup(h uint64) *entry { return s.shardFor(h).t.get(h) }

// each calls f for every live entry, one shard at a time.
func (s *store) each(f func(h uint64, e *entry)) {
	for i := range s.shards {
		s.shards[i].t.each(f)
	}
}

// insert returns the live entry for h, creating a full one, or nil when the
// store is at its cap and sweeping idle buckets freed no room.
func (s *store) insert(sh *shard, h uint64, now int64) *entry {
	if e, full := s.tryInsert(sh, h, now); !full {
		return e
	}
	if !s.pressureSweep(now) {
		return nil
	}
	e, _ := s.tryInsert(sh, h, now)
	return e
}

func (s *store) tryInsert(sh *shard, h uint64, now int64) (e *entry, full bool) {
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
	if s.clustered {
		e = &(&clusterEntry{}).entry
	} else {
		e = &entry{}
	}
	e.tat.Store(now)
	sh.t.put(h, e)
	s.live.Add(1)
	return e, false
}

// pressureSweep sweeps the whole store when the cap is reached, at most once
// per pressureSweepGap and by one goroutine at a time, so that a flood of
// new keys cannot make every request scan the store. It reports whether it
// swept.
func (s *store) pressureSweep(now int64) bool {
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
func (s *store) sweepLocked(sh *shard, now int64) {
	sh.nextSweep = now + sweepInterval
	var dropped int64
	sh.t.each(func(k uint64, e *entry) {
		// A bucket with unsent admits stays until the engine has sent them.
		if t := e.tat.Load(); t <= now && (!s.clustered || e.pending().Load() == 0) && e.tat.CompareAndSwap(t, evicted) {
			sh.t.remove(k)
			dropped++
		}
	})
	s.live.Add(-dropped)
}

// sweep drops every full bucket in the store.
func (s *store) sweep(now int64) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		s.sweepLocked(sh, now)
		sh.mu.Unlock()
	}
}

func (s *store) len() int64 { return s.live.Load() }
