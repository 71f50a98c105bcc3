package gopherpace

import "sync/atomic"

// keyTable is one shard's index from key hash to *E, an entry of the store: open addressing
// with linear probing, in slots that readers load atomically, so a lookup
// takes no lock and writes nothing. A Go map under a read lock cost two
// atomic adds per lookup on a cache line that every core touches.
//
// Writers (insert, remove, rebuild) hold the shard's lock. A removed key
// leaves a tombstone (its key, no entry) so that probes for keys placed
// after it still find them; a rebuild drops tombstones, and also shrinks
// the table after a flood of keys has been swept away, which a map never
// does. A rebuild publishes a new slot array; a reader still on the old one
// sees the same entries, and one it misses it looks up again under the
// lock.
type keyTable[E any] struct {
	slots atomic.Pointer[slotArray[E]]
	used  int // slots holding a key, live or tombstone; guarded by the shard lock
	live  int // guarded by the shard lock
}

type slotArray[E any] struct {
	mask uint64
	s    []keySlot[E]
}

type keySlot[E any] struct {
	key atomic.Uint64 // 0: never used
	e   atomic.Pointer[E]
}

// minSlots is a new table's size: a shard starts out small, since most
// limiters have far fewer than 256 live keys per shard.
const minSlots = 8

// home is slot key k's first slot. The store picks a key's shard by the
// low shardBits of its hash, so all the keys of one table share them; the
// home comes from the bits above, or only one slot in shardCount would
// ever be a home and probes would run through long clusters (at 1M keys,
// 40% of a keyed Take was spent probing).
func (a *slotArray[E]) home(k uint64) uint64 { return (k >> shardBits) & a.mask }

// slotKey maps a key hash to a slot key. Zero marks an empty slot, so hash 0
// shares hash 1's bucket: like any 64-bit collision, it can only admit less.
func slotKey(h uint64) uint64 { return max(h, 1) }

// get returns h's entry, or nil. It takes no lock.
func (t *keyTable[E]) get(h uint64) *E {
	a := t.slots.Load()
	if a == nil {
		return nil
	}
	k := slotKey(h)
	for i := a.home(k); ; i = (i + 1) & a.mask {
		switch a.s[i].key.Load() {
		case k:
			return a.s[i].e.Load()
		case 0:
			return nil
		}
	}
}

// put maps h to e; h must have no live entry. The caller holds the lock.
func (t *keyTable[E]) put(h uint64, e *E) {
	if a := t.slots.Load(); a == nil || (t.used+1)*4 > len(a.s)*3 {
		t.rebuild(t.live + 1)
	}
	a := t.slots.Load()
	k := slotKey(h)
	for i := a.home(k); ; i = (i + 1) & a.mask {
		s := &a.s[i]
		switch s.key.Load() {
		case k: // a tombstone of the same key: reuse it
			s.e.Store(e)
			t.live++
			return
		case 0:
			s.e.Store(e)
			s.key.Store(k)
			t.used++
			t.live++
			return
		}
	}
}

// remove drops h's entry, leaving a tombstone. The caller holds the lock.
func (t *keyTable[E]) remove(h uint64) {
	a := t.slots.Load()
	if a == nil {
		return
	}
	k := slotKey(h)
	for i := a.home(k); ; i = (i + 1) & a.mask {
		switch a.s[i].key.Load() {
		case k:
			if a.s[i].e.Swap(nil) != nil {
				t.live--
			}
			return
		case 0:
			return
		}
	}
}

// each calls f for every live entry, with its slot key. Without the lock
// it sees entries as some moment during the walk had them.
func (t *keyTable[E]) each(f func(k uint64, e *E)) {
	a := t.slots.Load()
	if a == nil {
		return
	}
	for i := range a.s {
		if e := a.s[i].e.Load(); e != nil {
			f(a.s[i].key.Load(), e)
		}
	}
}

// rebuild moves the live entries to a new array with room for at least
// want of them at half load. The caller holds the lock.
func (t *keyTable[E]) rebuild(want int) {
	n := minSlots
	for n < 2*want {
		n *= 2
	}
	b := &slotArray[E]{mask: uint64(n - 1), s: make([]keySlot[E], n)}
	used := 0
	if a := t.slots.Load(); a != nil {
		for i := range a.s {
			e := a.s[i].e.Load()
			if e == nil {
				continue
			}
			k := a.s[i].key.Load()
			j := b.home(k)
			for b.s[j].key.Load() != 0 {
				j = (j + 1) & b.mask
			}
			b.s[j].e.Store(e)
			b.s[j].key.Store(k)
			used++
		}
	}
	t.used = used
	t.slots.Store(b)
}
