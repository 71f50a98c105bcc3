//go:build race || gopherpace_atomic_counters || !(amd64 || arm64 || ppc64le || riscv64 || s390x || loong64)

package bucket

import (
	"sync/atomic"
	"unsafe"
)

// Where the race detector would flag the pinned slots' plain adds, or a
// 64-bit store may tear, no caller is pinned: every add is atomic.
func pin() int { return maxProcSlots }

func unpin() {}

// addShared adds to a slot picked from the caller's stack address, so
// that goroutines on different processors mostly land on different lines.
func (c *ProcCounter) addShared(n int64) {
	var here byte
	a := uintptr(unsafe.Pointer(&here))
	atomic.AddInt64(&c.slots[(a>>13^a>>17)%uintptr(len(c.slots))].n, n)
}
