package cluster

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

type (
	plainTable   = bucket.KeyTable[bucket.PlainEntry, bucket.PlainEntry, *bucket.PlainEntry]
	clusterTable = bucket.KeyTable[clusterSlot, clusterEntry, *clusterSlot]
)

// tag is the bucket word put gives key hash h in these tests, so that a
// lookup can check it found h's own entry.
func tag(h uint64) int64 { return int64(h >> 1) }

// tagTime is tag as the fill time that writes it into a new entry.
func tagTime(h uint64) bucket.Time { return bucket.Time(tag(h)) }

// The table agrees with a map through random puts and removes: tombstones
// keep later keys findable, re-puts reuse them, and rebuilds keep every
// live key, for both kinds of slot.
func TestKeyTableMatchesMap(t *testing.T) {
	t.Run("inline", func(t *testing.T) {
		var tb plainTable
		tableMatchesMap(t, tb.Get, tb.Put, tb.Remove, tb.Each, &tb.Live, func(e *bucket.PlainEntry) *atomic.Int64 { return &e.TAT })
	})
	t.Run("pointer", func(t *testing.T) {
		var tb clusterTable
		tableMatchesMap(t, tb.Get, tb.Put, tb.Remove, tb.Each, &tb.Live, func(e *clusterEntry) *atomic.Int64 { return &e.tat })
	})
}

func tableMatchesMap[E any](t *testing.T, get func(uint64) *E, put func(uint64, bucket.Time) *E, remove func(uint64),
	each func(func(uint64, *E)), live *int, word func(*E) *atomic.Int64) {
	// remove's contract: the store marks the bucket evicted first.
	evict := func(h uint64) {
		if e := get(h); e != nil {
			word(e).Store(bucket.Evicted)
			remove(h)
		}
	}
	want := map[uint64]bool{}
	rng := rand.New(rand.NewPCG(5, 6))
	// Few distinct keys with shared low bits, so that probe chains are long.
	key := func() uint64 { return rng.Uint64N(300) << 20 }
	check := func(i int, k uint64) {
		e := get(k)
		if want[bucket.SlotKey(k)] != (e != nil) {
			t.Fatalf("step %d: get(%#x) found %v, want %v", i, k, e != nil, want[bucket.SlotKey(k)])
		}
		if e != nil && word(e).Load() != tag(bucket.SlotKey(k)) {
			t.Fatalf("step %d: get(%#x) found another key's bucket", i, k)
		}
	}
	for i := range 60_000 {
		h := key()
		if rng.IntN(3) == 0 {
			evict(h)
			delete(want, bucket.SlotKey(h))
		} else if !want[bucket.SlotKey(h)] {
			put(h, tagTime(bucket.SlotKey(h)))
			want[bucket.SlotKey(h)] = true
		}
		if i%1000 == 0 {
			for k := range want {
				check(i, k)
			}
			if *live != len(want) {
				t.Fatalf("step %d: live %d, want %d", i, *live, len(want))
			}
		}
		check(i, h)
	}
	seen := 0
	each(func(k uint64, e *E) {
		if !want[k] || word(e).Load() != tag(k) {
			t.Fatalf("each gave %#x, which is not live or not its own", k)
		}
		seen++
	})
	if seen != len(want) {
		t.Fatalf("each saw %d entries, want %d", seen, len(want))
	}
}

// remove as the store does it: mark the bucket evicted, then drop the key.
func evictPlain(tb *plainTable, h uint64) {
	if e := tb.Get(h); e != nil {
		e.TAT.Store(bucket.Evicted)
		tb.Remove(h)
	}
}

// A table that held a flood of keys shrinks once they are gone.
func TestKeyTableShrinksAfterFlood(t *testing.T) {
	var tb plainTable
	for h := range uint64(3_000) {
		tb.Put(h+1, tagTime(h+1))
	}
	big := len(tb.Slots.Load().Cells)
	for h := range uint64(3_000) {
		evictPlain(&tb, h+1)
	}
	for h := range uint64(4) {
		tb.Put(h+1, tagTime(h+1))
	}
	// Churn through new keys until a put rebuilds the table.
	for n := uint64(1 << 40); len(tb.Slots.Load().Cells) >= big && n < 1<<40+100_000; n++ {
		tb.Put(n, tagTime(n))
		evictPlain(&tb, n)
	}
	if got := len(tb.Slots.Load().Cells); got >= big || got > 64 {
		t.Fatalf("%d slots after the flood left, %d at its height", got, big)
	}
	for h := range uint64(4) {
		if tb.Get(h+1) == nil {
			t.Fatalf("lost key %d in the shrink", h+1)
		}
	}
}

// Hash 0 cannot mark an empty slot: it shares hash 1's bucket.
func TestKeyTableHashZero(t *testing.T) {
	var tb plainTable
	e := tb.Put(0, tagTime(1))
	if tb.Get(0) != e || tb.Get(1) != e {
		t.Fatal("hash 0 is not found as itself and as 1")
	}
}

// Readers that never lock, while a writer puts, removes and rebuilds,
// only ever find a key's own entry or nothing; a key that stays put is
// always found, or (an inline entry, during a rebuild) found under the
// lock, as the store looks again.
func TestKeyTableLockFreeReaders(t *testing.T) {
	var tb plainTable
	var mu sync.Mutex
	const keep = 64
	for h := range uint64(keep) {
		tb.Put(h<<8|1, tagTime(h<<8|1))
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for !stop.Load() {
				h := rng.Uint64N(4096)<<8 | 1
				e := tb.Get(h)
				if e != nil {
					if w := e.TAT.Load(); w != tag(h) && w != bucket.Evicted {
						t.Errorf("get(%#x) found another key's entry", h)
						return
					}
				}
				if h>>8 < keep && e == nil {
					mu.Lock()
					e = tb.Get(h)
					mu.Unlock()
					if e == nil {
						t.Errorf("get(%#x) missed a key that never left", h)
						return
					}
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 30_000 {
		h := (keep+rng.Uint64N(4096-keep))<<8 | 1
		mu.Lock()
		if tb.Get(h) == nil {
			tb.Put(h, tagTime(h))
		} else {
			evictPlain(&tb, h)
		}
		mu.Unlock()
	}
	stop.Store(true)
	wg.Wait()
}

// Every key of one shard's table shares the hash's low bucket.ShardBits, as the
// store picks shards by them; the table must still spread those keys, or
// its probes run through long clusters.
func TestKeyTableSpreadsOneShardsKeys(t *testing.T) {
	var tb plainTable
	rng := rand.New(rand.NewPCG(7, 8))
	const shard, n = 37, 4000
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = rng.Uint64()<<bucket.ShardBits | shard
		tb.Put(hashes[i], tagTime(hashes[i]))
	}
	a := tb.Slots.Load()
	var probes uint64
	for _, h := range hashes {
		k := bucket.SlotKey(h)
		i := a.Home(k)
		for a.Cells[i].Key.Load() != k {
			i = (i + 1) & a.Mask
			probes++
		}
	}
	if mean := float64(probes) / n; mean > 2 {
		t.Fatalf("keys of one shard sit %.1f slots past their home on average, want under 2 (a table at most 3/4 full)", mean)
	}
}

// Takers that never lock spend from a few keys' buckets while a writer
// floods the same shards with new keys and sweeps them away again, so that
// the tables grow and shrink under them. Every admit must be on the books
// afterwards: a spend made on an inline bucket's old copy, after a rebuild
// copied it, would be an admit that no bucket remembers.
func TestRebuildLosesNoSpend(t *testing.T) {
	t.Run("inline", func(t *testing.T) {
		s := bucket.NewPlainStore(1<<30, nil, nil)
		rebuildLosesNoSpend(t, s, func(h uint64) int64 {
			var tat int64
			s.With(h, func(e *bucket.PlainEntry) { tat = e.TAT.Load() })
			return tat
		})
	})
	t.Run("pointer", func(t *testing.T) {
		s := NewStore(1<<30, nil, nil)
		rebuildLosesNoSpend(t, s, func(h uint64) int64 {
			if e := s.Lookup(h); e != nil {
				return e.tat.Load()
			}
			return 0 // never taken (its takers were not scheduled in time): nothing spent
		})
	})
}

func rebuildLosesNoSpend[S, E any, PS bucket.SlotValue[S, E], P bucket.Entry[E]](t *testing.T, s *bucket.Store[S, E, PS, P], tat func(uint64) int64) {
	const (
		shards    = 4 // the hot keys and the flood share these shards
		hot       = 32
		flood     = 40_000
		sweepEach = 4_000
		now       = int64(0)
	)
	rule := mustRule(t, 1000, 1<<30) // never denies within this test: every take spends
	var admitted [hot]atomic.Int64
	var done atomic.Bool
	var wg, started sync.WaitGroup
	var takes atomic.Int64
	started.Add(3)
	for g := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for first := true; !done.Load(); first = false {
				i := rng.IntN(hot)
				var d render.Decision
				s.Take(&d, uint64(i)<<bucket.ShardBits|uint64(i%shards), rule, bucket.Time(now), 1)
				if !d.Allowed {
					t.Errorf("key %d denied", i)
					if first {
						started.Done()
					}
					return
				}
				admitted[i].Add(1)
				takes.Add(1)
				if first {
					started.Done()
				}
			}
		})
	}
	// The flood starts once every taker runs, and goes on (up to 20 rounds)
	// until the takers have spent a thousand times during it: on a loaded
	// machine they may otherwise not be scheduled before it ends.
	started.Wait()
	rng := rand.New(rand.NewPCG(1, 2))
	before := takes.Load()
	for round := 0; round < 20 && (round == 0 || takes.Load()-before < 1000); round++ {
		for j := range flood {
			s.Get((rng.Uint64()|1<<40)<<bucket.ShardBits|uint64(j%shards), bucket.Time(now))
			if j%sweepEach == sweepEach-1 {
				s.Sweep(bucket.Time(now)) // drops every flooded key: their buckets are full
			}
		}
	}
	done.Store(true)
	wg.Wait()
	var total int64
	for i := range hot {
		spent := (tat(uint64(i)<<bucket.ShardBits|uint64(i%shards)) - now) / rule.Interval
		if spent != admitted[i].Load() {
			t.Errorf("key %d: %d admitted, its bucket has %d spent", i, admitted[i].Load(), spent)
		}
		total += spent
	}
	if total == 0 {
		t.Fatal("no take ran during the flood")
	}
}
