package conformance

import (
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// Limiter is a standalone limiter refilling rate tokens a second into a
// bucket of bucketSize, closed when t ends: for an adapter's own tests
// beside the suite.
func Limiter(t testing.TB, rate, bucketSize int64) *gopherpace.Limiter {
	t.Helper()
	return newLimiter(t, gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(bucketSize))
}

// limiter is the suite's limiter: one token a second into a bucket of
// bucketSize, with opts after.
func limiter(t *testing.T, bucketSize int64, opts ...gopherpace.Option) *gopherpace.Limiter {
	t.Helper()
	return newLimiter(t, append([]gopherpace.Option{gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(bucketSize)}, opts...)...)
}

func newLimiter(t testing.TB, opts ...gopherpace.Option) *gopherpace.Limiter {
	t.Helper()
	l, err := gopherpace.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
