package gopherpace

import (
	"sync"
	"sync/atomic"
)

// ghosts remember the debt of buckets evicted at the key cap (store.go),
// so that an evicted key that comes back starts where it left off, not
// from a full bucket: a client that cycles through a few more keys than
// the cap cannot refill its own buckets by evicting them. A ghost is the
// key's hash, exactly, its bucket's TAT and its rule's interval, 24
// bytes, kept until the bucket would have refilled. The cells are
// direct-mapped; when two ghosts meet in a cell, the one that owes more
// tokens stays, so a debt is forgotten only when the store and its ghosts
// both overflow, the smaller debts first.
type ghosts struct {
	any  atomic.Bool // a ghost was ever kept: inserts look only then
	mu   sync.Mutex
	cell []ghost // made at the first eviction
}

type ghost struct {
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

func (g *ghosts) cellOf(h uint64) *ghost {
	return &g.cell[(h*0x9e3779b97f4a7c15)>>32&uint64(len(g.cell)-1)]
}

// keep remembers the TAT of h's evicted bucket, whose rule's interval is
// interval, if it still owes anything at now, unless its cell holds
// another key's larger debt in tokens.
func (g *ghosts) keep(h uint64, tat, now, interval int64, cells int) {
	if tat <= now {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cell == nil {
		g.cell = make([]ghost, cells)
		g.any.Store(true)
	}
	c := g.cellOf(h)
	if c.h != 0 && c.h != h && (c.tat-now)/c.interval > (tat-now)/interval { // h is never 0 (slotKey)
		return
	}
	*c = ghost{h, tat, interval}
}

// start is the TAT a new bucket for h begins at: its ghost's, which it
// takes, while that is ahead of now; otherwise now (a full bucket).
func (g *ghosts) start(h uint64, now int64) int64 {
	if !g.any.Load() {
		return now
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.cellOf(h)
	if c.h != h {
		return now
	}
	tat := c.tat
	*c = ghost{}
	return max(tat, now)
}
