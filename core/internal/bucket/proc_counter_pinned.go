//go:build !race && !gopherpace_atomic_counters && (amd64 || arm64 || ppc64le || riscv64 || s390x || loong64)

package bucket

import (
	"sync/atomic"
	_ "unsafe" // go:linkname
)

// procPin and procUnpin keep the goroutine on its P with preemption off,
// as sync.Pool does; the runtime keeps them for outside callers. While
// pinned, nothing else runs on the P, so its slot has one writer, and a
// 64-bit store is never torn on these platforms.
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// pin returns the caller's P, which stays the caller's until unpin.
func pin() int { return procPin() }

func unpin() { procUnpin() }

// addShared is the add of processors that have no slot of their own.
func (c *ProcCounter) addShared(n int64) { atomic.AddInt64(&c.slots[len(c.slots)-1].n, n) }
