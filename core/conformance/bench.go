package conformance

import (
	"testing"
	"time"

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

// The draft fields an adapter sends on every admit from a BenchLimiter
// (its bucket refills between requests, so one token leaves
// 999,999,999). FieldsFloor parts set them as constants, the
// framework's way: what the framework itself spends storing two
// response fields, next to what the adapter spends finding and storing
// them.
const (
	BenchPolicyField = `"default";q=1000000000;w=1`
	BenchLimitField  = `"default";r=999999999;t=1`
)

// CheckBenchFields fails b unless policy and limit, the fields an
// adapter sent in a benchmark, are BenchPolicyField and BenchLimitField:
// the fields-floor part is then like for like.
func CheckBenchFields(b *testing.B, policy, limit string) {
	b.Helper()
	if policy != BenchPolicyField || limit != BenchLimitField {
		b.Fatalf("the adapter sent RateLimit-Policy %q, RateLimit %q; the fields-floor part sets %q, %q", policy, limit, BenchPolicyField, BenchLimitField)
	}
}

// A Part is one of the things Interleave measures side by side: Serve
// does one request (or one Take).
type Part struct {
	Name  string
	Serve func()
}

// TakePart is a bare Take of key from a BenchLimiter, as a Part named
// "take": the floor of BenchTake, for Interleave.
func TakePart(b *testing.B, key string) Part {
	l := BenchLimiter(b)
	return Part{Name: "take", Serve: func() {
		if d, err := l.Take(key, 1); err != nil || !d.Allowed {
			b.Fatalf("Take(%q) = %+v, %v", key, d, err)
		}
	}}
}

// interleaveBatch is how many requests a part serves before the next
// part's turn: enough that the clock reads around a batch, and the
// caches another part left cold, cost under 1% of it; few enough (a
// batch takes well under a millisecond) that each part sees the machine
// as the others do.
const interleaveBatch = 1024

// Interleave measures parts side by side: each serves a batch of requests
// in turn, the first part of each round rotating, until each has served
// b.N. It reports each part's time per request as the metric
// "<name>-ns/op". On a shared machine whose speed drifts within seconds,
// ratios of these are steady where ratios of separate benchmarks are not:
// every part ran at the same moments.
func Interleave(b *testing.B, parts ...Part) {
	spent := make([]time.Duration, len(parts))
	b.ResetTimer()
	for done, round := 0, 0; done < b.N; done, round = done+interleaveBatch, round+1 {
		for k := range parts {
			i := (k + round) % len(parts)
			start := time.Now()
			for range interleaveBatch {
				parts[i].Serve()
			}
			spent[i] += time.Since(start)
		}
	}
	n := float64((b.N + interleaveBatch - 1) / interleaveBatch * interleaveBatch)
	for i, p := range parts {
		b.ReportMetric(float64(spent[i].Nanoseconds())/n, p.Name+"-ns/op")
	}
}
