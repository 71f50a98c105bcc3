package bucket

import (
	"runtime"
	"sync/atomic"
)

// ProcCounter is a counter that every processor adds to without a locked
// instruction: each P owns a slot on cache lines of its own and is its
// only writer while pinned (proc_counter_pinned.go), so an add is a plain one.
// Race builds and 32-bit platforms add atomically instead, to a slot
// picked by the caller's stack (proc_counter_atomic.go); processors beyond
// those there were at creation add atomically to one shared slot. Reading sums the slots; a sum read during
// adds is short of the adds in flight, never torn. Make one with
// NewProcCounter.
type ProcCounter struct {
	slots []paddedInt64 // one per P at creation, then the shared one
}

// paddedInt64 fills two cache lines, as CPUs fetch lines in pairs.
type paddedInt64 struct {
	n int64
	_ [120]byte
}

// maxProcSlots bounds a counter's memory: 128 bytes a slot.
const maxProcSlots = 256

func NewProcCounter() ProcCounter {
	return ProcCounter{slots: make([]paddedInt64, min(runtime.GOMAXPROCS(0), maxProcSlots)+1)}
}

func (c *ProcCounter) Add(n int64) {
	if p := pin(); p < len(c.slots)-1 {
		c.slots[p].n += n
		unpin()
		return
	}
	unpin()
	c.addShared(n)
}

func (c *ProcCounter) Load() int64 {
	var sum int64
	for i := range c.slots {
		sum += atomic.LoadInt64(&c.slots[i].n)
	}
	return sum
}
