package bench

import (
	"strconv"
	"sync"
	"testing"
)

type outcome int

const (
	admitting outcome = iota // every call is allowed
	denying                  // every call after the first is denied
)

// run times f, then checks that it behaved as expected, so that a
// benchmark cannot silently measure the wrong path.
func run(b *testing.B, parallel bool, f func() bool, want outcome) {
	b.ReportAllocs()
	var mu sync.Mutex
	allowed, total := 0, 0
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			a, n := 0, 0
			for pb.Next() {
				if f() {
					a++
				}
				n++
			}
			mu.Lock()
			allowed, total = allowed+a, total+n
			mu.Unlock()
		})
	} else {
		for b.Loop() {
			if f() {
				allowed++
			}
			total++
		}
	}
	b.StopTimer()
	if want == admitting && allowed != total {
		b.Fatalf("admit path: %d of %d allowed", allowed, total)
	}
	if want == denying && allowed > 1 {
		b.Fatalf("deny path: %d of %d allowed", allowed, total)
	}
}

var (
	keysOnce sync.Once
	keyTable []string
)

// key is the i-th of the 1M fixture keys, shared by every side (the key
// strings are not what is measured, except in BytesPerKey).
func key(i int) string {
	keysOnce.Do(func() {
		keyTable = make([]string, 1_000_000)
		for i := range keyTable {
			keyTable[i] = freshKey(i)
		}
	})
	return keyTable[i]
}

// freshKey builds the i-th key in a new string, as a server builds one
// from each request.
func freshKey(i int) string {
	return "203." + strconv.Itoa(i>>16) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)
}

// keyedRun spreads calls over the first n keys, each goroutine with its own
// stride, so that the goroutines do not walk the keys in lockstep.
func keyedRun(b *testing.B, n int, f func(string) bool) {
	key(0)
	ks := keyTable[:n]
	b.ReportAllocs()
	var seed sync.Mutex
	next := 0
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		seed.Lock()
		i := next * 7919
		next++
		seed.Unlock()
		for pb.Next() {
			i = (i + 104729) % len(ks)
			if !f(ks[i]) {
				b.Error("keyed request denied")
				return
			}
		}
	})
	b.StopTimer()
}
