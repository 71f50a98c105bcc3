package conformance

import (
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// BenchLimiter is the limiter every adapter benchmark spends from: so
// large and so fast to refill that every request is admitted, so that the
// benchmark measures the admit path. It is closed when b ends.
func BenchLimiter(b *testing.B) *gopherpace.Limiter {
	b.Helper()
	l, err := gopherpace.New(gopherpace.WithRefillRate(1_000_000_000), gopherpace.WithBucketSize(1_000_000_000))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchTake is the floor an adapter's cost is measured against, run in the
// same benchmark binary: a bare Take of key (the key the adapter's
// benchmark request maps to) from a BenchLimiter. docs/performance.md
// reports each adapter's added cost as a multiple of it.
func BenchTake(b *testing.B, key string) {
	l := BenchLimiter(b)
	b.ReportAllocs()
	for b.Loop() {
		if d, err := l.Take(key, 1); err != nil || !d.Allowed {
			b.Fatalf("Take(%q) = %+v, %v", key, d, err)
		}
	}
}
