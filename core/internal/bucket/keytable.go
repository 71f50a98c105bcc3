package bucket

import "sync/atomic"

// KeyTable is one shard's index from key hash to entry: open addressing
// with linear probing, in slots that readers load atomically, so a lookup
// takes no lock and writes nothing. A Go map under a read lock cost two
// atomic adds per lookup on a cache line that every core touches.
//
// Each slot holds an S inline (see SlotValue): a standalone bucket itself, so
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
type KeyTable[S, E any, PS SlotValue[S, E]] struct {
	Slots atomic.Pointer[slotArray[S]]
	used  int // slots holding a key, live or tombstone; guarded by the shard lock
	Live  int // guarded by the shard lock
}

// SlotValue is what a slot of a KeyTable holds inline.
type SlotValue[S, E any] interface {
	*S
	// Entry is the slot's live entry, or nil for a tombstone.
	Entry() *E
	// Fill puts a new full bucket, as of now, in a slot with no live entry.
	Fill(at Time) *E
	// MoveTo hands a live entry over to dst, a slot of a new array, and
	// reports whether there was one. An inline entry leaves a tombstone
	// behind, atomically with the hand-over: a taker still on the old
	// array then retries on the new one instead of spending on a copy
	// that nothing reads any more.
	MoveTo(dst *S) bool
	// Vacate makes the slot a tombstone once the store has marked its
	// bucket evicted.
	Vacate()
}

type slotArray[S any] struct {
	Mask  uint64
	Cells []KeySlot[S]
}

type KeySlot[S any] struct {
	Key atomic.Uint64 // 0: never used
	v   S
}

// minSlots is a new table's size: a shard starts out small, since most
// limiters have far fewer than 256 live keys per shard.
const minSlots = 8

// Home is slot key k's first slot. The store picks a key's shard by the
// low ShardBits of its hash, so all the keys of one table share them; the
// home comes from the bits above, or only one slot in ShardCount would
// ever be a home and probes would run through long clusters (at 1M keys,
// 40% of a keyed Take was spent probing).
func (a *slotArray[S]) Home(k uint64) uint64 { return (k >> ShardBits) & a.Mask }

// SlotKey maps a key hash to a slot key. Zero marks an empty slot, so hash 0
// shares hash 1's bucket: a collision of the keyed hash like any other,
// which nobody without its secret can find (keyhash.go).
func SlotKey(h uint64) uint64 { return max(h, 1) }

// find returns the slot holding h's key in a, or nil.
func (a *slotArray[S]) find(h uint64) *KeySlot[S] {
	k := SlotKey(h)
	for i := a.Home(k); ; i = (i + 1) & a.Mask {
		switch a.Cells[i].Key.Load() {
		case k:
			return &a.Cells[i]
		case 0:
			return nil
		}
	}
}

// Get returns h's live entry, or nil. It takes no lock.
func (t *KeyTable[S, E, PS]) Get(h uint64) *E {
	if a := t.Slots.Load(); a != nil {
		if s := a.find(h); s != nil {
			return PS(&s.v).Entry()
		}
	}
	return nil
}

// Put gives h a new full bucket as of now and returns it; h must have no
// live entry. The caller holds the lock.
func (t *KeyTable[S, E, PS]) Put(h uint64, at Time) *E {
	if a := t.Slots.Load(); a == nil || (t.used+1)*4 > len(a.Cells)*3 {
		t.rebuild(t.Live + 1)
	}
	a := t.Slots.Load()
	k := SlotKey(h)
	for i := a.Home(k); ; i = (i + 1) & a.Mask {
		s := &a.Cells[i]
		switch s.Key.Load() {
		case k: // a tombstone of the same key: reuse it
			t.Live++
			return PS(&s.v).Fill(at)
		case 0:
			e := PS(&s.v).Fill(at)
			s.Key.Store(k) // after the fill: a reader that sees the key sees the bucket
			t.used++
			t.Live++
			return e
		}
	}
}

// Remove turns h's slot, whose bucket the caller has just marked evicted,
// into a tombstone. The caller holds the lock.
func (t *KeyTable[S, E, PS]) Remove(h uint64) {
	if a := t.Slots.Load(); a != nil {
		if s := a.find(h); s != nil {
			PS(&s.v).Vacate()
			t.Live--
		}
	}
}

// Each calls f for every live entry, with its slot key. Without the lock
// it sees entries as some moment during the walk had them.
func (t *KeyTable[S, E, PS]) Each(f func(k uint64, e *E)) {
	a := t.Slots.Load()
	if a == nil {
		return
	}
	for i := range a.Cells {
		if k := a.Cells[i].Key.Load(); k != 0 {
			if e := PS(&a.Cells[i].v).Entry(); e != nil {
				f(k, e)
			}
		}
	}
}

// sample calls f for up to n live entries, the first from the slot at
// start (modulo the table's size) on, and returns how many it called f
// for. The caller holds the lock.
func (t *KeyTable[S, E, PS]) sample(start uint64, n int, f func(k uint64, e *E)) (seen int) {
	a := t.Slots.Load()
	if a == nil || t.Live == 0 {
		return 0
	}
	for i, walked := start&a.Mask, uint64(0); seen < n && walked <= a.Mask; i, walked = (i+1)&a.Mask, walked+1 {
		if k := a.Cells[i].Key.Load(); k != 0 {
			if e := PS(&a.Cells[i].v).Entry(); e != nil {
				f(k, e)
				seen++
			}
		}
	}
	return seen
}

// rebuild moves the live entries to a new array with room for at least
// want of them at half load. The caller holds the lock.
func (t *KeyTable[S, E, PS]) rebuild(want int) {
	n := minSlots
	for n < 2*want {
		n *= 2
	}
	b := &slotArray[S]{Mask: uint64(n - 1), Cells: make([]KeySlot[S], n)}
	used := 0
	if a := t.Slots.Load(); a != nil {
		for i := range a.Cells {
			k := a.Cells[i].Key.Load()
			if k == 0 {
				continue
			}
			j := b.Home(k)
			for b.Cells[j].Key.Load() != 0 {
				j = (j + 1) & b.Mask
			}
			if PS(&a.Cells[i].v).MoveTo(&b.Cells[j].v) {
				b.Cells[j].Key.Store(k)
				used++
			}
		}
	}
	t.used = used
	t.Slots.Store(b)
}
