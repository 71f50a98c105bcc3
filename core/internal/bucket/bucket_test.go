package bucket

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBucketBurstThenRefill(t *testing.T) {
	rule := mustRule(t, 10, 5)
	var tat atomic.Int64
	for i := range 5 {
		d, _ := take(&tat, rule, 0, 1)
		if !d.Allowed || d.Remaining != int64(4-i) {
			t.Fatalf("request %d: %+v, want allowed with %d remaining", i, d, 4-i)
		}
	}
	d, _ := take(&tat, rule, 0, 1)
	if d.Allowed || d.RetryAfter != 100*time.Millisecond || d.Remaining != 0 {
		t.Fatalf("6th request: %+v, want denied, retry 100ms", d)
	}
	if d.ResetAfter != 500*time.Millisecond || d.Window != 500*time.Millisecond || d.BucketSize != 5 {
		t.Fatalf("6th request: %+v, want reset 500ms, window 500ms, limit 5", d)
	}
	if d, _ := take(&tat, rule, Time(100*time.Millisecond)-1, 1); d.Allowed {
		t.Fatal("a token appeared 1ns early")
	}
	if d, _ := take(&tat, rule, Time(100*time.Millisecond), 1); !d.Allowed {
		t.Fatal("no token after one interval")
	}
	// Long idle: full again, never more than the bucket size.
	later := int64(time.Hour)
	for i := range 6 {
		d, _ := take(&tat, rule, Time(later), 1)
		if d.Allowed != (i < 5) {
			t.Fatalf("after idle, request %d allowed=%v", i, d.Allowed)
		}
	}
}

func TestBucketAwkwardRates(t *testing.T) {
	for _, rate := range []int64{1, 3, 7, 999, 1_000_000, 3_000_000} {
		// A bucket that holds 2 ms of refill never overflows between the
		// 1 ms polls below, so no refill is lost to the polling.
		bucketSize := rate/500 + 10
		rule := mustRule(t, rate, bucketSize)
		var tat atomic.Int64
		take(&tat, rule, 0, bucketSize) // drain
		admitted := int64(0)
		for now := int64(time.Millisecond); now <= int64(time.Second); now += int64(time.Millisecond) {
			for {
				d, _ := take(&tat, rule, Time(now), 1)
				if !d.Allowed {
					break
				}
				admitted++
			}
		}
		if want := int64(time.Second) / rule.Interval; admitted != want {
			t.Errorf("rate %d: admitted %d in 1s, want exactly %d (1s / %dns)", rate, admitted, want, rule.Interval)
		}
		if admitted > rate {
			t.Errorf("rate %d: admitted %d in 1s, more than the rate", rate, admitted)
		}
		// Rounding the interval up to whole nanoseconds delays each token
		// by under a nanosecond: at most one token (the one due exactly at
		// 1s) plus a 1/interval fraction is lost.
		if floor := rate - 1 - rate/rule.Interval; admitted < floor {
			t.Errorf("rate %d: admitted %d in 1s, want at least %d", rate, admitted, floor)
		}
	}
}

func TestBucketRateThreePerSecondInterval(t *testing.T) {
	rule := mustRule(t, 3, 3)
	if rule.Interval != 333_333_334 {
		t.Fatalf("interval %d, want 333333334 (rounded up)", rule.Interval)
	}
	var tat atomic.Int64
	for range 3 {
		if d, _ := take(&tat, rule, 0, 1); !d.Allowed {
			t.Fatal("burst of 3 not admitted")
		}
	}
	if d, _ := take(&tat, rule, 333_333_333, 1); d.Allowed {
		t.Fatal("admitted before a whole interval passed")
	}
	if d, _ := take(&tat, rule, 333_333_334, 1); !d.Allowed {
		t.Fatal("not admitted after a whole interval")
	}
}

func TestBucketCostN(t *testing.T) {
	rule := mustRule(t, 100, 10)
	var tat atomic.Int64
	if d, _ := take(&tat, rule, 0, 7); !d.Allowed || d.Remaining != 3 {
		t.Fatalf("cost 7: %+v", d)
	}
	d, _ := take(&tat, rule, 0, 4)
	if d.Allowed {
		t.Fatal("cost 4 admitted with 3 left")
	}
	if d.RetryAfter != 10*time.Millisecond || d.Remaining != 3 {
		t.Fatalf("denied cost 4: %+v, want retry 10ms, 3 remaining", d)
	}
	if d, _ := take(&tat, rule, 0, 3); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("cost 3 with 3 left: %+v", d)
	}
}

func TestBucketTimeBackwards(t *testing.T) {
	rule := mustRule(t, 10, 2)
	var tat atomic.Int64
	now := int64(time.Second)
	take(&tat, rule, Time(now), 2)
	// Going back in time never refills.
	for _, back := range []int64{now - 1, 0, -int64(time.Hour)} {
		if d, _ := take(&tat, rule, Time(back), 1); d.Allowed {
			t.Fatalf("admitted at %d after time went backwards", back)
		}
	}
	if d, _ := take(&tat, rule, Time(now+int64(100*time.Millisecond)), 1); !d.Allowed {
		t.Fatal("refill lost after time went backwards")
	}
}

func TestRefundNeverOverfills(t *testing.T) {
	rule := mustRule(t, 10, 3)
	var tat atomic.Int64
	take(&tat, rule, 0, 3)
	Refund(&tat, rule, 0, 1)
	if d, _ := take(&tat, rule, 0, 1); !d.Allowed {
		t.Fatal("refunded token not available")
	}
	// Owing 3, the bucket can have spent 6 within its window: a refund of
	// 100 is refused whole, one of 6 fills it, and no more.
	if Refund(&tat, rule, 0, 100) {
		t.Fatal("a refund of 100 tokens owing 3 was taken")
	}
	if d, _ := take(&tat, rule, 0, 1); d.Allowed {
		t.Fatal("a refused refund gave tokens back")
	}
	if !Refund(&tat, rule, 0, 6) {
		t.Fatal("a refund of 6 tokens owing 3 (and a bucket of 3) was refused")
	}
	admitted := 0
	for range 10 {
		if d, _ := take(&tat, rule, 0, 1); d.Allowed {
			admitted++
		}
	}
	if admitted != 3 {
		t.Fatalf("after a huge refund admitted %d, want the bucket size 3", admitted)
	}
}

func TestNewRuleValidation(t *testing.T) {
	for _, tc := range []struct {
		rate, bucketSize int64
		want             string
	}{
		{0, 1, "must be at least 1 token per"},
		{-5, 1, "must be at least 1 token per"},
		{2_000_000_000, 1, "above the maximum"},
		{10, 0, "must be at least 1 token, got"},
		{10, -1, "must be at least 1 token, got"},
		{1, 2_000_000_000, "would take more than"},
	} {
		_, err := NewRule(tc.rate, time.Second, tc.bucketSize)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("newRule(%d, %d) = %v, want error containing %q", tc.rate, tc.bucketSize, err, tc.want)
		}
	}
	if _, err := NewRule(1, time.Second, 1_000_000_000); err != nil {
		t.Errorf("a burst of 1e9 at 1/s should be accepted: %v", err)
	}
	if _, err := NewRule(1_000_000_000, time.Second, 1_000_000_000); err != nil {
		t.Errorf("1e9/s with a burst of 1e9 should be accepted: %v", err)
	}
}

func TestBucketConcurrentAdmitsExactlyTheBucketSize(t *testing.T) {
	const bucketSize = 10_000
	rule := mustRule(t, 1, bucketSize)
	var tat atomic.Int64
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range bucketSize / 2 {
				if d, _ := take(&tat, rule, 0, 1); d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != bucketSize {
		t.Fatalf("8 goroutines admitted %d at one instant, want exactly %d", got, bucketSize)
	}
}

// FuzzBucketNeverExceedsRate feeds arbitrary rates over any period and
// arbitrary (time step, cost) sequences, including steps back in time, and
// checks the admitted total never exceeds B + tokens·t/per, t being the
// distance the caller's time moved forward in all. (Not the span of times
// reached: a step back by over two windows restarts the bucket empty, see
// settle, and the times after it can be ones already passed.)
func FuzzBucketNeverExceedsRate(f *testing.F) {
	f.Add(int64(7), int64(1_000_000), int64(3), []byte{0, 1, 2, 255, 9, 0, 0, 3})
	f.Add(int64(1_000_000), int64(1_000_000), int64(1000), []byte{1, 1, 1, 1, 200, 7})
	f.Add(int64(100), int64(3_600_000_000), int64(100), []byte{127, 1, 127, 1, 127, 99, 128, 5})
	f.Add(int64(1000), int64(86_400_000_000), int64(10), []byte{127, 1, 127, 1, 1, 9})
	f.Fuzz(func(t *testing.T, tokens, perMicros, bucketSize int64, steps []byte) {
		per := time.Duration(perMicros) * time.Microsecond
		rule, err := NewRule(tokens, per, bucketSize)
		if err != nil {
			return
		}
		var tat atomic.Int64
		now, furthest, earliest, forward, admitted := int64(0), int64(0), int64(0), int64(0), int64(0)
		for i := 0; i+1 < len(steps); i += 2 {
			// Signed steps of up to ±127 intervals/4: back in time too,
			// by more than a window at times.
			step := int64(int8(steps[i])) * (rule.Interval / 4)
			now += step
			furthest, earliest, forward = max(furthest, now), min(earliest, now), forward+max(step, 0)
			n := int64(steps[i+1])%min(rule.BucketSize, 16) + 1
			if d, _ := take(&tat, rule, Time(now), n); d.Allowed {
				admitted += n
			}
			// The bucket starts full at 0: at most B, plus the refill of
			// the time moved forward, tokens·forward/per rounded down.
			hi, lo := bits.Mul64(uint64(forward), uint64(tokens))
			refill, _ := bits.Div64(hi, lo, uint64(per))
			if bound := rule.BucketSize + int64(refill); admitted > bound {
				t.Fatalf("%d per %v, bucket %d: admitted %d with time moved forward %v in all, bound %d", tokens, per, bucketSize, admitted, time.Duration(forward), bound)
			}
			if earliest > -rule.Tolerance && furthest <= 0 && admitted > rule.BucketSize {
				t.Fatalf("admitted %d > bucket %d before time advanced, with time back less than a window", admitted, rule.BucketSize)
			}
		}
	})
}

// TokensIn divides exactly: every interval, around every multiple, up to
// the largest spans a bucket allows.
func TestTokensInDividesExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	rates := []int64{1, 3, 7, 1000, 999_983, 1_000_000_000}
	for range 200 {
		rates = append(rates, 1+rng.Int64N(int64(time.Second)))
	}
	for _, rate := range rates {
		rule := mustRule(t, rate, 1)
		d := rule.Interval
		xs := []int64{0, 1, d - 1, d, d + 1, MaxTolerance, MaxTolerance - 1, math.MaxInt64, math.MaxInt64 - 1}
		for range 200 {
			k := rng.Int64N(MaxTolerance/d + 1)
			xs = append(xs, k*d-1, k*d, k*d+1, rng.Int64N(math.MaxInt64))
		}
		for _, x := range xs {
			if x < 0 {
				continue
			}
			if got, want := rule.TokensIn(x, d), x/d; got != want {
				t.Fatalf("interval %d: tokensIn(%d) = %d, want %d", d, x, got, want)
			}
		}
		if got, want := rule.TokensIn(-5*d-1, d), (-5*d-1)/d; got != want {
			t.Fatalf("negative span: %d, want %d", got, want)
		}
		if got := rule.TokensIn(10*d, 2*d); got != 5 {
			t.Fatalf("a scaled unit: %d, want 5", got)
		}
	}
}
