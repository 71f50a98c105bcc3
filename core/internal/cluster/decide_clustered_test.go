package cluster

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// racingSource fills every lease slot just after taking a lease, as another
// processor would if the pool had handed it the same slot: the lease just
// taken must then go back to the bucket.
type racingSource struct {
	bucket.LeaseSource
	lz *bucket.Leases
}

func (r racingSource) TakeUpTo(rule *bucket.Rule, now bucket.Time, n int64) (int64, time.Duration, bool) {
	got, retry, contended := r.LeaseSource.TakeUpTo(rule, now, n)
	for i := range r.lz.Slots {
		r.lz.Slots[i].Word.Store(bucket.PackLease(int64(now), 5))
	}
	return got, retry, contended
}

func TestLeaseTakenTwiceGoesBack(t *testing.T) {
	for _, clustered := range []bool{false, true} {
		name := map[bool]string{false: "standalone", true: "clustered"}[clustered]
		t.Run(name, func(t *testing.T) {
			te := newTestEngine(t, 1, 100_000, 2) // no ticks drain the count
			now := int64(time.Second)
			rule, at := te.rule, te.bucketTime(now)
			var plain atomic.Int64
			plain.Store(bucket.NeverUsed)
			var src bucket.LeaseSource = bucket.PlainSource{TAT: &plain}
			if clustered {
				src = countedSource{te.Engine}
			}
			if ok, _ := te.leases.Allow(racingSource{src, te.leases}, rule, at); !ok {
				t.Fatal("denied from a full bucket")
			}
			// One token admitted; the rest of the lease went back.
			for i := range te.leases.Slots {
				te.leases.Slots[i].Word.Store(0)
			}
			var d render.Decision
			if clustered {
				if got := te.word.pending(); got != 1 {
					t.Fatalf("%d tokens counted for gossip, want 1", got)
				}
				te.TakeGlobal(&d, now, 2)
			} else {
				d, _ = take(&plain, rule, at, 2)
			}
			if d.Remaining != 100_000-3 {
				t.Fatalf("%d tokens left after two more, want %d", d.Remaining, 100_000-3)
			}
		})
	}
}

// A clustered refund of the global bucket gives the tokens back and takes
// them out of the count not yet reported; after Stop it refunds the
// standalone word the state moved to.
func TestClusteredGlobalRefund(t *testing.T) {
	te := newTestEngine(t, 1, 100, 0) // no ticks: the counts stay unreported for the test to read
	now := int64(time.Second)
	var d render.Decision
	if te.TakeGlobal(&d, now, 10); !d.Allowed || d.Remaining != 90 {
		t.Fatalf("take: %+v", d)
	}
	te.RefundGlobal(now, 4)
	if got := te.word.pending(); got != 6 {
		t.Fatalf("%d tokens left to report, want 6", got)
	}
	if te.TakeGlobal(&d, now, 1); d.Remaining != 93 {
		t.Fatalf("after the refund %d remain, want 93", d.Remaining)
	}
	te.Stop()
	te.RefundGlobal(now, 3)
	if te.TakeGlobal(&d, now, 1); d.Remaining != 95 {
		t.Fatalf("after Stop and a refund %d remain, want 95", d.Remaining)
	}
}

func TestClusteredKeyedRefund(t *testing.T) {
	te := newTestEngine(t, 1, 100, 0)
	now, h := int64(time.Second), uint64(0x6b6b)
	var d render.Decision
	te.TakeKeyed(&d, h, te.rule, now, 10)
	te.RefundKeyed(h, te.rule, now, 4)
	if got := te.keys.Lookup(h).pending.Load(); got != 6 {
		t.Fatalf("%d tokens left to report, want 6", got)
	}
	if te.TakeKeyed(&d, h, te.rule, now, 1); d.Remaining != 93 {
		t.Fatalf("after the refund %d remain, want 93", d.Remaining)
	}
	te.RefundKeyed(h+1, te.rule, now, 5) // no bucket: nothing to refund, no panic
}
