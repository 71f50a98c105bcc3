package gopherpace

import (
	"sync/atomic"
	"unsafe"
)

// stripedCounter is a counter that many cores can add to at once without
// trading one cache line: each add goes to a stripe picked from the
// caller's stack address, so goroutines on different processors mostly
// land on different lines. Reading sums the stripes.
type stripedCounter struct {
	stripes [counterStripes]struct {
		n atomic.Int64
		_ [56]byte
	}
}

const counterStripes = 16

func (c *stripedCounter) add(n int64) {
	var here byte
	a := uintptr(unsafe.Pointer(&here))
	c.stripes[(a>>13^a>>17)%counterStripes].n.Add(n)
}

func (c *stripedCounter) load() int64 {
	var sum int64
	for i := range c.stripes {
		sum += c.stripes[i].n.Load()
	}
	return sum
}
