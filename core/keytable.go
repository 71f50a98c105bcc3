package gopherpace

import "sync/atomic"

// keyTable is one shard's index from key hash to entry: open addressing
// with linear probing, in slots that readers load atomically, so a lookup
// takes no lock and writes nothing. A Go map under a read lock cost two
// atomic adds per lookup on a cache line that every core touches.
//
// Each slot holds an S inline (see slotValue): a standalone bucket itself, so
// that a lookup finds the bucket in the slot it probed, or a clustered
// entry's pointer.
//
// Writers (put, remove, rebuild) hold the shard's lock. A removed key
// leaves a tombstone (its key, no entry) so that probes for keys placed
// after it still find them; a rebuild drops tombstones, and also shrinks
// the table after a flood of keys has been swept away, which a map never
// does. A rebuild publishes a new slot array; a reader still on the old
// one finds either the same entry or, for an inline one, a tombstone, and
// looks again under the lock.
type keyTable[S, E any, PS slotValue[S, E]] struct {
	slots atomic.Pointer[slotArray[S]]
	used  int // slots holding a key, live or tombstone; guarded by the shard lock
	live  int // guarded by the shard lock
}

// slotValue is what a slot of a keyTable holds inline.
type slotValue[S, E any] interface {
	*S
	// entry is the slot's live entry, or nil for a tombstone.
	entry() *E
	// fill puts a new full bucket, as of now, in a slot with no live entry.
	fill(at bucketTime) *E
	// moveTo hands a live entry over to dst, a slot of a new array, and
	// reports whether there was one. An inline entry leaves a tombstone
	// behind, atomically with the hand-over: a taker still on the old
	// array then retries on the new one instead of spending on a copy
	// that nothing reads any more.
	moveTo(dst *S) bool
	// vacate makes the slot a tombstone once the store has marked its
	// bucket evicted.
	vacate()
}

type slotArray[S any] struct {
	mask uint64
	s    []keySlot[S]
}

type keySlot[S any] struct {
	key atomic.Uint64 // 0: never used
	v   S
}

// minSlots is a new table's size: a shard starts out small, since most
// limiters have far fewer than 256 live keys per shard.
const minSlots = 8

// home is slot key k's first slot. The store picks a key's shard by the
// low shardBits of its hash, so all the keys of one table share them; the
// home comes from the bits above, or only one slot in shardCount would
// ever be a home and probes would run through long clusters (at 1M keys,
// 40% of a keyed Take was spent probing).
func (a *slotArray[S]) home(k uint64) uint64 { return (k >> shardBits) & a.mask }

// slotKey maps a key hash to a slot key. Zero marks an empty slot, so hash 0
// shares hash 1's bucket: a collision of the keyed hash like any other,
// which nobody without its secret can find (keyhash.go).
func slotKey(h uint64) uint64 { return max(h, 1) }

// find returns the slot holding h's key in a, or nil.
func (a *slotArray[S]) find(h uint64) *keySlot[S] {
	k := slotKey(h)
	for i := a.home(k); ; i = (i + 1) & a.mask {
		switch a.s[i].key.Load() {
		case k:
			return &a.s[i]
		case 0:
			return nil
		}
	}
}

// get returns h's live entry, or nil. It takes no lock.
func (t *keyTable[S, E, PS]) get(h uint64) *E {
	if a := t.slots.Load(); a != nil {
		if s := a.find(h); s != nil {
			return PS(&s.v).entry()
		}
	}
	return nil
}

// put gives h a new full bucket as of now and returns it; h must have no
// live entry. The caller holds the lock.
func (t *keyTable[S, E, PS]) put(h uint64, at bucketTime) *E {
	if a := t.slots.Load(); a == nil || (t.used+1)*4 > len(a.s)*3 {
		t.rebuild(t.live + 1)
	}
	a := t.slots.Load()
	k := slotKey(h)
	for i := a.home(k); ; i = (i + 1) & a.mask {
		s := &a.s[i]
		switch s.key.Load() {
		case k: // a tombstone of the same key: reuse it
			t.live++
			return PS(&s.v).fill(at)
		case 0:
			e := PS(&s.v).fill(at)
			s.key.Store(k) // after the fill: a reader that sees the key sees the bucket
			t.used++
			t.live++
			return e
		}
	}
}

// remove turns h's slot, whose bucket the caller has just marked evicted,
// into a tombstone. The caller holds the lock.
func (t *keyTable[S, E, PS]) remove(h uint64) {
	if a := t.slots.Load(); a != nil {
		if s := a.find(h); s != nil {
			PS(&s.v).vacate()
			t.live--
		}
	}
}

// each calls f for every live entry, with its slot key. Without the lock
// it sees entries as some moment during the walk had them.
func (t *keyTable[S, E, PS]) each(f func(k uint64, e *E)) {
	a := t.slots.Load()
	if a == nil {
		return
	}
	for i := range a.s {
		if k := a.s[i].key.Load(); k != 0 {
			if e := PS(&a.s[i].v).entry(); e != nil {
				f(k, e)
			}
		}
	}
}

// sample calls f for up to n live entries, the first from the slot at
// start (modulo the table's size) on, and returns how many it called f
// for. The caller holds the lock.
func (t *keyTable[S, E, PS]) sample(start uint64, n int, f func(k uint64, e *E)) (seen int) {
	a := t.slots.Load()
	if a == nil || t.live == 0 {
		return 0
	}
	for i, walked := start&a.mask, uint64(0); seen < n && walked <= a.mask; i, walked = (i+1)&a.mask, walked+1 {
		if k := a.s[i].key.Load(); k != 0 {
			if e := PS(&a.s[i].v).entry(); e != nil {
				f(k, e)
				seen++
			}
		}
	}
	return seen
}

// rebuild moves the live entries to a new array with room for at least
// want of them at half load. The caller holds the lock.
func (t *keyTable[S, E, PS]) rebuild(want int) {
	n := minSlots
	for n < 2*want {
		n *= 2
	}
	b := &slotArray[S]{mask: uint64(n - 1), s: make([]keySlot[S], n)}
	used := 0
	if a := t.slots.Load(); a != nil {
		for i := range a.s {
			k := a.s[i].key.Load()
			if k == 0 {
				continue
			}
			j := b.home(k)
			for b.s[j].key.Load() != 0 {
				j = (j + 1) & b.mask
			}
			if PS(&a.s[i].v).moveTo(&b.s[j].v) {
				b.s[j].key.Store(k)
				used++
			}
		}
	}
	t.used = used
	t.slots.Store(b)
}
