package gopherpace

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/cluster"
)

// Helpers shared by this package's internal tests.

var t0 = time.Unix(1_700_000_000, 0)

func newTestLimiter(t testing.TB, opts ...Option) *Limiter {
	t.Helper()
	l, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustRule(t testing.TB, rate, bucketSize int64) *bucket.Rule {
	t.Helper()
	rule, err := bucket.NewRule(rate, time.Second, bucketSize)
	if err != nil {
		t.Fatal(err)
	}
	return rule
}

func leasingLimiter(t *testing.T, rate, bucketSize int64) *Limiter {
	t.Helper()
	l, err := New(WithRefillRate(rate), WithBucketSize(bucketSize))
	if err != nil {
		t.Fatal(err)
	}
	// As on a 2-processor machine, whatever this one has.
	if !setLeases(l, 2) {
		t.Fatalf("a bucket of %d does not lease", bucketSize)
	}
	return l
}

// spendUntilDenied runs 8 goroutines that spend one token at a time at at,
// one in four through Take and the rest through Allow, each until its first
// denial, calling after (if set) with the running total after each admit.
// It returns the total admitted.
func spendUntilDenied(l *Limiter, at time.Time, after func(admitted int64)) int64 {
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for {
				var ok bool
				if g%4 == 3 {
					d, _ := l.TakeAt(at, "", 1)
					ok = d.Allowed
				} else {
					ok, _ = l.AllowAt(at)
				}
				if !ok {
					return
				}
				if n := admitted.Add(1); after != nil {
					after(n)
				}
			}
		})
	}
	wg.Wait()
	return admitted.Load()
}

// nopTransport is a cluster of one that drops every frame: enough to run
// the clustered request path at full speed.
type nopTransport struct{ _ byte } // not zero-sized: each is a transport of its own

func (nopTransport) Name() string                                        { return "solo" }
func (nopTransport) MaxFrameSize() int                                   { return 1350 }
func (nopTransport) Broadcast([]byte) error                              { return nil }
func (nopTransport) Subscribe(func(string, []byte)) (unsubscribe func()) { return func() {} }
func (nopTransport) Members() []string                                   { return nil }
func (nopTransport) Close() error                                        { return nil }

// KeyHashSecret gives the test fakes memtransport's secret, so that a
// test's frames and its limiters name keys alike (TestFrame).
func (nopTransport) KeyHashSecret() []byte { return TestKeyHashSecret }

// frozenTransport is nopTransport on a clock that stands still and never
// fires: no tick runs, so counts stay unreported for a test to read.
type frozenTransport struct {
	nopTransport
	now time.Time
}

func (f *frozenTransport) Now() time.Time { return f.now }
func (*frozenTransport) AfterFunc(time.Duration, func()) func() bool {
	return func() bool { return true }
}

// setLeases gives standalone l leases sized for procs processors, as on a
// machine with that many, whatever this one has. It reports false when l's
// bucket is too small to lease. A clustered limiter's engine keeps the
// leases it was built with: build it withLeaseProcs.
func setLeases(l *Limiter, procs int) bool {
	if l.dec.eng != nil {
		panic("setLeases of a clustered limiter: use withLeaseProcs")
	}
	l.leases = bucket.NewLeasesFor(l.rules.Default(), procs)
	return l.leases != nil
}

// withLeaseProcs sizes a limiter's leases for procs processors, as on a
// machine with that many, whatever this one has.
func withLeaseProcs(procs int) Option { return func(c *config) { c.leaseProcs = procs } }

// engineOf is a clustered limiter's engine, or nil standalone.
func engineOf(l *Limiter) *cluster.Engine { return l.dec.eng }

// bucketNanos is t on the buckets' clock of a limiter with no lag: a
// standalone one, or a clustered one that has never lost sight of a peer.
func (l *Limiter) bucketNanos(t time.Time) bucket.Time { return bucket.Time(l.nanos(t)) }
