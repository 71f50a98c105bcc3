package bucket

import (
	"sync"
	"sync/atomic"
)

// Ghosts remember the debt of buckets evicted at the key cap (store.go),
// so that an evicted key that comes back starts where it left off, not
// from a full bucket: a client that cycles through a few more keys than
// the cap cannot refill its own buckets by evicting them. A ghost is the
// key's hash, exactly, its bucket's TAT and its rule's interval, 24
// bytes, kept until the bucket would have refilled. A key's ghost lives in
// one set of ghostWays cells; when the set is full of ghosts that still
// owe, the one that owes the fewest tokens gives way, so a debt is
// forgotten only when the store and its ghosts both overflow, the
// smaller debts first.
type Ghosts struct {
	any  atomic.Bool // a ghost was ever kept: inserts look only then
	mu   sync.Mutex
	Cell []Ghost // made at the first eviction
}

type Ghost struct {
	h        uint64 // 0: none
	tat      int64
	interval int64 // the key's rule's, to price the debt in tokens
}

// ghostCells is the number of ghosts a store of maxKeys keeps: a quarter
// of its keys, between 64 and 2^18 (6 MiB), a power of two.
func ghostCells(maxKeys int64) int {
	n := 64
	for int64(n) < maxKeys/4 && n < 1<<18 {
		n *= 2
	}
	return n
}

// ghostWays is how many cells a key's ghost may take: a few, so that
// ghosts of keys that meet in one place do not push each other out.
const ghostWays = 4

// SetOf is the cells h's ghost may live in.
func (g *Ghosts) SetOf(h uint64) []Ghost {
	sets := uint64(len(g.Cell) / ghostWays)
	i := (h * 0x9e3779b97f4a7c15) >> 32 % sets * ghostWays
	return g.Cell[i : i+ghostWays]
}

// Keep remembers the TAT of h's evicted bucket, whose rule's interval is
// interval, if it still owes anything at now, unless its cell holds
// another key's larger debt in tokens.
func (g *Ghosts) Keep(h uint64, tat, now, interval int64, cells int) {
	if tat <= now {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.Cell == nil {
		g.Cell = make([]Ghost, cells)
		g.any.Store(true)
	}
	// h's own cell, or an empty or lapsed one, or else the one owing the
	// fewest tokens, if fewer than h owes (h is never 0: SlotKey).
	set := g.SetOf(h)
	var c *Ghost
	for i := range set {
		switch o := &set[i]; {
		case o.h == h || o.h == 0 || o.tat <= now:
			*o = Ghost{h, tat, interval}
			return
		case c == nil || (o.tat-now)/o.interval < (c.tat-now)/c.interval:
			c = o
		}
	}
	if (c.tat-now)/c.interval < (tat-now)/interval {
		*c = Ghost{h, tat, interval}
	}
}

// Start is the TAT a new bucket for h begins at: its ghost's, which it
// takes, while that is ahead of now; otherwise now (a full bucket).
func (g *Ghosts) Start(h uint64, now int64) int64 {
	if !g.any.Load() {
		return now
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	set := g.SetOf(h)
	for i := range set {
		if c := &set[i]; c.h == h {
			tat := c.tat
			*c = Ghost{}
			return max(tat, now)
		}
	}
	return now
}
