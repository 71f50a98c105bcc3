package gopherpace

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// newTagged returns an entry that records the key it belongs to, so that a
// lookup can check it found the right one.
func newTagged(h uint64) *plainEntry {
	e := &plainEntry{}
	e.tat.Store(int64(h >> 1))
	return e
}

// The table agrees with a map through random puts and removes: tombstones
// keep later keys findable, re-puts reuse them, and rebuilds keep every
// live key.
func TestKeyTableMatchesMap(t *testing.T) {
	var tb keyTable[plainEntry]
	want := map[uint64]*plainEntry{}
	rng := rand.New(rand.NewPCG(5, 6))
	// Few distinct keys with shared low bits, so that probe chains are long.
	key := func() uint64 { return rng.Uint64N(300) << 20 }
	for i := range 60_000 {
		h := key()
		if rng.IntN(3) == 0 {
			tb.remove(h)
			delete(want, slotKey(h))
		} else if want[slotKey(h)] == nil {
			e := newTagged(h)
			tb.put(h, e)
			want[slotKey(h)] = e
		}
		if i%1000 == 0 {
			for k, e := range want {
				if got := tb.get(k); got != e {
					t.Fatalf("step %d: get(%#x) = %p, want %p", i, k, got, e)
				}
			}
			if tb.live != len(want) {
				t.Fatalf("step %d: live %d, want %d", i, tb.live, len(want))
			}
		}
		if got := tb.get(h); got != want[slotKey(h)] {
			t.Fatalf("step %d: get(%#x) = %p, want %p", i, h, got, want[slotKey(h)])
		}
	}
	seen := 0
	tb.each(func(k uint64, e *plainEntry) {
		if want[k] != e {
			t.Fatalf("each gave %#x → %p, want %p", k, e, want[k])
		}
		seen++
	})
	if seen != len(want) {
		t.Fatalf("each saw %d entries, want %d", seen, len(want))
	}
}

// A table that held a flood of keys shrinks once they are gone.
func TestKeyTableShrinksAfterFlood(t *testing.T) {
	var tb keyTable[plainEntry]
	for h := range uint64(3_000) {
		tb.put(h+1, newTagged(h+1))
	}
	big := len(tb.slots.Load().s)
	for h := range uint64(3_000) {
		tb.remove(h + 1)
	}
	for h := range uint64(4) {
		tb.put(h+1, newTagged(h+1))
	}
	// Churn through new keys until a put rebuilds the table.
	for n := uint64(1 << 40); len(tb.slots.Load().s) >= big && n < 1<<40+100_000; n++ {
		tb.put(n, newTagged(n))
		tb.remove(n)
	}
	if got := len(tb.slots.Load().s); got >= big || got > 64 {
		t.Fatalf("%d slots after the flood left, %d at its height", got, big)
	}
	for h := range uint64(4) {
		if tb.get(h+1) == nil {
			t.Fatalf("lost key %d in the shrink", h+1)
		}
	}
}

// Hash 0 cannot mark an empty slot: it shares hash 1's bucket.
func TestKeyTableHashZero(t *testing.T) {
	var tb keyTable[plainEntry]
	e := newTagged(0)
	tb.put(0, e)
	if tb.get(0) != e || tb.get(1) != e {
		t.Fatal("hash 0 is not found as itself and as 1")
	}
}

// Readers that never lock, while a writer puts, removes and rebuilds,
// only ever find a key's own entry or nothing; a key that stays put is
// always found.
func TestKeyTableLockFreeReaders(t *testing.T) {
	var tb keyTable[plainEntry]
	var mu sync.Mutex
	const keep = 64
	for h := range uint64(keep) {
		tb.put(h<<8|1, newTagged(h<<8|1))
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for !stop.Load() {
				h := rng.Uint64N(4096)<<8 | 1
				e := tb.get(h)
				if e != nil && e.tat.Load() != int64(h>>1) {
					t.Errorf("get(%#x) found another key's entry", h)
					return
				}
				if h>>8 < keep && e == nil {
					t.Errorf("get(%#x) missed a key that never left", h)
					return
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 30_000 {
		h := (keep+rng.Uint64N(4096-keep))<<8 | 1
		mu.Lock()
		if tb.get(h) == nil {
			tb.put(h, newTagged(h))
		} else {
			tb.remove(h)
		}
		mu.Unlock()
	}
	stop.Store(true)
	wg.Wait()
}

// Every key of one shard's table shares the hash's low shardBits, as the
// store picks shards by them; the table must still spread those keys, or
// its probes run through long clusters.
func TestKeyTableSpreadsOneShardsKeys(t *testing.T) {
	var tb keyTable[plainEntry]
	rng := rand.New(rand.NewPCG(7, 8))
	const shard, n = 37, 4000
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = rng.Uint64()<<shardBits | shard
		tb.put(hashes[i], newTagged(hashes[i]))
	}
	a := tb.slots.Load()
	var probes uint64
	for _, h := range hashes {
		k := slotKey(h)
		i := a.home(k)
		for a.s[i].key.Load() != k {
			i = (i + 1) & a.mask
			probes++
		}
	}
	if mean := float64(probes) / n; mean > 2 {
		t.Fatalf("keys of one shard sit %.1f slots past their home on average, want under 2 (a table at most 3/4 full)", mean)
	}
}
