package gopherpace

import (
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
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
			opts := []Option{WithRefillRate(1), WithBucketSize(100_000)}
			if clustered {
				opts = append(opts, WithTransport(&frozenTransport{now: time.Now()})) // no ticks drain the count
			}
			l := newTestLimiter(t, opts...)
			if !setLeases(l, 2) {
				t.Fatal("no leases")
			}
			at := l.epoch.Add(time.Second)
			rule, now := l.rules.dflt(), l.bucketNanos(at)
			var src bucket.LeaseSource = bucket.PlainSource{TAT: &l.global.TAT}
			if clustered {
				src = countedSource{engineOf(l)}
			}
			if ok, _ := l.leases.Allow(racingSource{src, l.leases}, rule, now); !ok {
				t.Fatal("denied from a full bucket")
			}
			// One token admitted; the rest of the lease went back.
			for i := range l.leases.Slots {
				l.leases.Slots[i].Word.Store(0)
			}
			if clustered {
				if got := engineOf(l).word.pending(); got != 1 {
					t.Fatalf("%d tokens counted for gossip, want 1", got)
				}
			}
			if d, _ := l.TakeAt(at, "", 2); d.Remaining != 100_000-3 {
				t.Fatalf("%d tokens left after two more, want %d", d.Remaining, 100_000-3)
			}
		})
	}
}

// A clustered refund of the global bucket gives the tokens back and takes
// them out of the count not yet reported; after Close it refunds the
// standalone word the state moved to.
func TestClusteredGlobalRefund(t *testing.T) {
	// No ticks: the counts stay unreported for the test to read.
	l := newTestLimiter(t, WithRefillRate(1), WithBucketSize(100), WithTransport(&frozenTransport{now: time.Now()}))
	t0 := l.epoch.Add(time.Second) // the counted word reads times near the engine's clock
	if d, _ := l.TakeAt(t0, "", 10); !d.Allowed || d.Remaining != 90 {
		t.Fatalf("take: %+v", d)
	}
	l.RefundAt(t0, "", 4)
	if got := engineOf(l).word.pending(); got != 6 {
		t.Fatalf("%d tokens left to report, want 6", got)
	}
	if d, _ := l.TakeAt(t0, "", 1); d.Remaining != 93 {
		t.Fatalf("after the refund %d remain, want 93", d.Remaining)
	}
	l.Close()
	l.RefundAt(t0, "", 3)
	if d, _ := l.TakeAt(t0, "", 1); d.Remaining != 95 {
		t.Fatalf("after Close and a refund %d remain, want 95", d.Remaining)
	}
}

func TestClusteredKeyedRefund(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(1), WithBucketSize(100), WithTransport(&frozenTransport{now: time.Now()}))
	t0 := l.epoch.Add(time.Second)
	l.TakeAt(t0, "k", 10)
	l.RefundAt(t0, "k", 4)
	h := l.hasher.Sum("k")
	if got := engineOf(l).keys.Lookup(h).pending.Load(); got != 6 {
		t.Fatalf("%d tokens left to report, want 6", got)
	}
	if d, _ := l.TakeAt(t0, "k", 1); d.Remaining != 93 {
		t.Fatalf("after the refund %d remain, want 93", d.Remaining)
	}
	l.RefundAt(t0, "absent", 5) // no bucket: nothing to refund, no panic
}
