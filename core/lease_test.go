package gopherpace

import (
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

// Small buckets never lease: a batch would be a large part of the bucket.
func TestLeasesOnlyForRoomyBuckets(t *testing.T) {
	if l, _ := New(WithRefillRate(10), WithBucketSize(10)); l.leases != nil {
		t.Fatal("a bucket of 10 leases")
	}
	if l, _ := New(WithRefillRate(10), WithBucketSize(1e6)); l.leases == nil {
		t.Fatal("a bucket of a million does not lease")
	}
	tr, err := New(WithRefillRate(1e6), WithBucketSize(1e6), WithTransport(&nopTransport{}))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.leases == nil {
		t.Fatal("a clustered bucket of a million does not lease")
	}
}

// One goroutine never contends, so it never leases, whatever times it
// passes, including times before the limiter was created.
func TestLeasesStayColdWithoutContention(t *testing.T) {
	l := leasingLimiter(t, 1000, 100_000)
	at := l.epoch.Add(-time.Second)
	for i := range 50_000 {
		l.AllowAt(at.Add(time.Duration(i) * time.Microsecond))
	}
	if l.leases.HotUntil.Load() != bucket.NeverUsed || l.leases.Leased(0) != 0 || l.leases.Leased(l.bucketNanos(at)) != 0 {
		t.Fatalf("serial calls leased: hot until %d, %d tokens leased", l.leases.HotUntil.Load(), l.leases.Leased(0))
	}
}

// While hot, goroutines at one instant that each stop at their first
// denial admit exactly one bucket between them: no request is turned away
// while a lease still holds a token.
func TestLeasesAdmitExactlyOneBucket(t *testing.T) {
	const bucketSize = 10_000
	for round := range 5 {
		l := leasingLimiter(t, 1, bucketSize)
		at := l.epoch.Add(time.Second)
		l.leases.Heat(l.bucketNanos(at))
		if got := spendUntilDenied(l, at, nil); got != bucketSize {
			t.Fatalf("round %d: 8 goroutines admitted %d at one instant, want exactly %d", round, got, bucketSize)
		}
		if n := l.leases.Leased(l.bucketNanos(at)); n != 0 {
			t.Fatalf("round %d: %d tokens left in leases after the bucket ran dry", round, n)
		}
	}
}

// Against explicit time, a hot bucket never admits more than B + R·(w + 1 ms)
// in any window w: leased tokens expire instead of adding to a refilled
// bucket. A lease here (7 tokens) is far more than R·1 ms (1 token), so
// tokens kept past a refill would show.
func TestLeasesHoldTheWindowBound(t *testing.T) {
	const rate, bucketSize = 1_000, 1_000
	l := leasingLimiter(t, rate, 100_000)
	l.rules.Replace(&bucket.RuleSet{Default: mustRule(t, rate, bucketSize)})
	setLeases(l, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	var times []int64 // the time of every admit, in order
	now := bucket.Time(time.Second)
	for range 100_000 {
		l.leases.Heat(now)
		// Mostly bursts at one instant, sometimes a pause that refills.
		if rng.IntN(1000) == 0 {
			now += bucket.Time(rng.Int64N(int64(2 * time.Second)))
		} else {
			now += bucket.Time(rng.Int64N(int64(2 * time.Microsecond)))
		}
		if ok, _, _ := l.dec.allow(int64(now)); ok {
			times = append(times, int64(now))
		}
	}
	if len(times) < 10*bucketSize {
		t.Fatalf("only %d admitted", len(times))
	}
	for _, w := range []int64{0, int64(time.Millisecond), int64(100 * time.Millisecond), int64(time.Second), int64(10 * time.Second)} {
		limit := bucketSize + rate*(w+bucket.LeaseLife)/int64(time.Second)
		lo := 0
		for hi, t1 := range times {
			for times[lo] < t1-w {
				lo++
			}
			if n := int64(hi - lo + 1); n > limit {
				t.Fatalf("window %v ending at %d admitted %d, bound %d", time.Duration(w), t1, n, limit)
			}
		}
	}
}

// Stats count tokens in fresh leases as the bucket's: they are still
// available. (In a synctest bubble the clock stands still, so Stats reads
// the very time the lease was taken at.)
func TestLeasesCountInStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := leasingLimiter(t, 1, 100_000)
		now := time.Now()
		if d, _ := l.TakeAt(now, "", 5); !d.Allowed {
			t.Fatal("denied")
		}
		// As a lease would: 5 tokens out of the word into a slot.
		l.leases.Slots[0].Word.Store(bucket.PackLease(l.nanos(now), 5))
		if got := l.Stats().GlobalTokens; got != 100_000 {
			t.Fatalf("GlobalTokens %d, want 100000", got)
		}
		if n := l.leases.Leased(l.bucketNanos(now.Add(2 * time.Millisecond))); n != 0 {
			t.Fatalf("an expired lease counts %d tokens", n)
		}
		if n := l.leases.Leased(l.bucketNanos(now.Add(-2 * time.Millisecond))); n != 0 {
			t.Fatalf("a lease from 2 ms in the future counts %d tokens", n)
		}
	})
}

// A request the word denies spends a token from another processor's fresh
// lease, on every path: hot, cold and Take.
func TestLeasesDenialSpendsAnyLease(t *testing.T) {
	for _, label := range []string{"hot", "cold", "take", "clustered hot", "clustered cold", "clustered take"} {
		path := label
		l := leasingLimiter(t, 1, 100_000)
		if strings.HasPrefix(path, "clustered") {
			var err error
			if l, err = New(WithRefillRate(1), WithBucketSize(100_000), WithTransport(&nopTransport{}), withLeaseProcs(4)); err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			path = strings.TrimPrefix(path, "clustered ")
		} else {
			setLeases(l, 4)
		}
		at := l.epoch.Add(time.Second)
		now := l.nanos(at)
		if d, _ := l.TakeAt(at, "", 100_000); !d.Allowed {
			t.Fatal("could not empty the bucket")
		}
		// Three tokens leased to a slot other than this goroutine's.
		own := l.leases.Pool.Get().(*bucket.LeaseSlot)
		l.leases.Pool.Put(own)
		other := &l.leases.Slots[0]
		if other == own {
			other = &l.leases.Slots[1]
		}
		other.Word.Store(bucket.PackLease(now, 3))
		if path == "hot" {
			l.leases.Heat(bucket.Time(now))
		}
		spend := func() bool {
			if path == "take" {
				d, _ := l.TakeAt(at, "", 1)
				return d.Allowed
			}
			ok, _ := l.AllowAt(at)
			return ok
		}
		for i := range 3 {
			if !spend() {
				t.Fatalf("%s: denied request %d while a lease held tokens", label, i+1)
			}
		}
		if spend() {
			t.Fatalf("%s: admitted a 4th token from a bucket of 3", label)
		}
	}
}

// FuzzLeasingNeverExceedsRate: a bucket that leases on every call still
// admits no more than B + R·t by the furthest time t reached, whatever the
// sequence of steps (back in time too), Allows and Takes.
func FuzzLeasingNeverExceedsRate(f *testing.F) {
	f.Add(int64(1000), int64(1000), []byte{0, 1, 2, 255, 9, 0, 0, 3, 128, 1})
	f.Add(int64(100_000), int64(5000), []byte{1, 1, 1, 1, 200, 7, 100, 100})
	f.Fuzz(func(t *testing.T, rate, bucketSize int64, steps []byte) {
		l, err := New(WithRefillRate(rate), WithBucketSize(bucketSize))
		if err != nil {
			return
		}
		if !setLeases(l, 2) {
			return
		}
		rule := l.rules.Default()
		now, furthest, admitted := int64(0), int64(0), int64(0)
		for i := 0; i+1 < len(steps); i += 2 {
			// Signed steps of up to ±127 intervals/16: many calls share a
			// lease's millisecond, some outlive it.
			now += int64(int8(steps[i])) * max(1, rule.Interval/16)
			furthest = max(furthest, now)
			l.leases.Heat(bucket.Time(now))
			if steps[i+1]%4 == 0 {
				var d Decision
				if _, err := l.take(&d, now, "", 1); err == nil && d.Allowed {
					admitted++
				}
			} else if ok, _, _ := l.dec.allow(now); ok {
				admitted++
			}
			bound := rule.BucketSize + furthest/int64(time.Second)*rate + (furthest%int64(time.Second))*rate/int64(time.Second)
			if admitted > max(bound, rule.BucketSize) {
				t.Fatalf("rate %d bucket %d: admitted %d by t=%v, bound %d", rate, bucketSize, admitted, time.Duration(furthest), bound)
			}
		}
	})
}

// Clustered and hot, goroutines that stop at their first denial admit
// exactly one bucket, and every token leased out is counted for gossip.
// Closing part-way hands the bucket back without losing or adding any.
func TestClusteredLeasesAdmitAndCountExactlyOneBucket(t *testing.T) {
	const bucketSize = 10_000
	for round := range 6 {
		l, err := New(WithRefillRate(1), WithBucketSize(bucketSize), WithTransport(&nopTransport{}), withLeaseProcs(2))
		if err != nil {
			t.Fatal(err)
		}
		at := l.epoch.Add(time.Second)
		l.leases.Heat(l.bucketNanos(at))
		closeAt := int64(-1)
		if round%2 == 1 {
			closeAt = int64(round) * 1000
		}
		got := spendUntilDenied(l, at, func(admitted int64) {
			if admitted == closeAt {
				l.Close()
			}
		})
		l.Close()
		if got != bucketSize {
			t.Fatalf("round %d: admitted %d at one instant, want exactly %d", round, got, bucketSize)
		}
		if closeAt < 0 {
			if got := l.Stats().TokensReported; got != bucketSize {
				t.Fatalf("round %d: reported %d tokens to peers, admitted %d", round, got, bucketSize)
			}
		}
	}
}

// One lost race does not make a bucket hot (it may be the engine's flush,
// at most one a millisecond); two within a millisecond do.
func TestLeasesHeatOnRepeatedLostRaces(t *testing.T) {
	l := leasingLimiter(t, 1, 100_000)
	now := bucket.Time(time.Second)
	l.leases.Lost(now)
	l.leases.Lost(now + bucket.Time(2*time.Millisecond))
	if l.leases.Hot(now + bucket.Time(2*time.Millisecond)) {
		t.Fatal("hot after lost races 2 ms apart")
	}
	l.leases.Lost(now + bucket.Time(2500*time.Microsecond))
	if !l.leases.Hot(now + bucket.Time(3*time.Millisecond)) {
		t.Fatal("not hot after lost races 0.5 ms apart")
	}
	if l.leases.Hot(now + bucket.Time(2500*time.Microsecond) + bucket.Time(bucket.HotWindow)) {
		t.Fatal("still hot a hot window later")
	}
}
