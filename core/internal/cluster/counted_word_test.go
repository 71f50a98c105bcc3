package cluster

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// The word keeps 58 bits of time and reads them back relative to now: exact
// on both sides of every wrap point, and the count beside it untouched.
func TestCountedWordReadsTimeAcrossWrap(t *testing.T) {
	const wrap = bucket.Time(1) << 58
	nows := []bucket.Time{0, -1, 1, wrap - 3, wrap + 3, -wrap + 7, 3*wrap - 1, math.MaxInt64 / 2, math.MinInt64 / 2, bucket.Time(math.MaxInt64 - MaxTolerance*3)}
	aheads := []int64{staleAhead + 1, -int64(time.Hour), -1, 0, 1, MaxTolerance, 2*MaxTolerance + MaxTolerance/2}
	for _, now := range nows {
		for _, a := range aheads {
			for _, count := range []int64{0, 1, countMax} {
				w := packCounted(int64(now)+a, count)
				if got := ahead(w, now); got != a {
					t.Fatalf("now %d: time %d ahead read back as %d", now, a, got)
				}
				if got := int64(w & countMask); got != count {
					t.Fatalf("now %d: count %d read back as %d", now, count, got)
				}
			}
		}
	}
}

// Fed the same calls, the counted bucket decides exactly as the standalone
// one, and every token it admits is drained exactly once.
func TestCountedDecidesLikeBucket(t *testing.T) {
	for _, tc := range []struct{ rate, bucketSize int64 }{{3, 5}, {1000, 1000}, {7, 200}, {1_000_000, 10}} {
		rule := mustRule(t, tc.rate, tc.bucketSize)
		rule.Ceiling = 2 * rule.Tolerance // clustered: peers' debits may add a bucket of debt
		var plain atomic.Int64
		plain.Store(bucket.NeverUsed)
		var c countedWord
		now := bucket.Time(1) << 40
		c.init(now)
		rng := rand.New(rand.NewPCG(uint64(tc.rate), uint64(tc.bucketSize)))
		admitted, drained := int64(0), int64(0)
		for i := range 20_000 {
			now += bucket.Time(rng.Int64N(3 * rule.Interval))
			switch op := rng.IntN(20); {
			case op == 0:
				n := 1 + rng.Int64N(tc.bucketSize)
				bucket.Debit(&plain, rule, now, n, rule.Tolerance)
				c.debit(rule, now, n, rule.Tolerance)
			case op == 1:
				n := 1 + rng.Int64N(tc.bucketSize)
				bucket.Refund(&plain, rule, now, n)
				before := c.unreported(c.word.Load())
				c.refund(rule, now, n)
				admitted -= before - c.unreported(c.word.Load())
			case op == 2:
				drained += c.drain(rule, now)
			case op < 10:
				n := 1 + rng.Int64N(min(tc.bucketSize, 100))
				want, _ := take(&plain, rule, now, n)
				var got render.Decision
				_, ok := c.take(&got, rule, now, n, noShare)
				if !ok || got != want {
					t.Fatalf("rate %d step %d: take(%d) = %+v, want %+v", tc.rate, i, n, got, want)
				}
				if got.Allowed {
					admitted += n
				}
			default:
				wantOK, wantRetry, _ := bucket.Allow(&plain, rule, now, 1)
				ok, retry, _, fast, _ := c.allow(rule, now, noShare)
				if !fast {
					var d render.Decision
					c.take(&d, rule, now, 1, noShare)
					ok, retry = d.Allowed, d.RetryAfter
				}
				if ok != wantOK || retry != wantRetry {
					t.Fatalf("rate %d step %d: allow = %v %v, want %v %v", tc.rate, i, ok, retry, wantOK, wantRetry)
				}
				if ok {
					admitted++
				}
			}
		}
		drained += c.drain(rule, now)
		if drained != admitted {
			t.Fatalf("rate %d: drained %d tokens, admitted %d", tc.rate, drained, admitted)
		}
	}
}

// Goroutines admitting while another drains: no token is counted twice or
// lost, whether it sits in the word's field or spilled past it.
func TestCountedConcurrentDrain(t *testing.T) {
	rule := mustRule(t, 1_000_000_000, 1_000_000_000)
	var c countedWord
	c.init(0)
	var admitted, drained atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 20_000 {
				now := bucket.Time(i)
				if g%2 == 0 {
					if ok, _, _, fast, _ := c.allow(rule, now, noShare); fast {
						if ok {
							admitted.Add(1)
						}
						continue
					}
				}
				n := int64(1 + i%100)
				var d render.Decision
				if c.take(&d, rule, now, n, noShare); d.Allowed {
					admitted.Add(n)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			drained.Add(c.drain(rule, 0))
		}
	}()
	wg.Wait()
	stop.Store(true)
	<-done
	drained.Add(c.drain(rule, 0))
	if drained.Load() != admitted.Load() || admitted.Load() == 0 {
		t.Fatalf("drained %d tokens, admitted %d", drained.Load(), admitted.Load())
	}
}

// A caller's time years away from the bucket's never admits extra: years
// back the bucket reads as spent, years ahead as empty, and it fills again
// from there.
func TestCountedFarTimesNeverAdmitExtra(t *testing.T) {
	rule := mustRule(t, 10, 10)
	rule.Ceiling = 2 * rule.Tolerance
	emptied := func() *countedWord {
		var c countedWord
		c.init(0)
		for range 10 {
			if d := c.decide(rule, 0, 1); !d.Allowed {
				t.Fatal("a fresh bucket denied")
			}
		}
		return &c
	}
	year := bucket.Time(365 * 24 * time.Hour)
	for _, at := range []bucket.Time{-3 * year, -5 * year, 3 * year, 5 * year} {
		if ok, _, _, _, _ := emptied().allow(rule, at, noShare); ok {
			t.Fatalf("an empty bucket admitted at %v from its time", time.Duration(at))
		}
	}
	c := emptied()
	later := 3 * year
	c.drain(rule, later) // a tick at the far time: read as empty from there
	if d := c.decide(rule, later, 1); d.Allowed {
		t.Fatal("admitted at once after an unreadable time")
	}
	if d := c.decide(rule, later+bucket.Time(rule.Tolerance), 10); !d.Allowed {
		t.Fatalf("not full a window later: %+v", d)
	}
}

// FuzzCountedDecidesLikeBucket: for any sequence of takes, debits, refunds
// and drains, the counted word decides as the plain word and counts every
// admitted token exactly once.
func FuzzCountedDecidesLikeBucket(f *testing.F) {
	f.Add(int64(3), int64(1_000_000), int64(5), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(int64(1000), int64(1_000_000), int64(100), []byte{255, 255, 0, 0, 77, 3, 200, 1})
	f.Add(int64(100), int64(3_600_000_000), int64(100), []byte{127, 0, 9, 127, 2, 50, 1, 1, 1})
	f.Fuzz(func(t *testing.T, tokens, perMicros, bucketSize int64, ops []byte) {
		rule, err := bucket.NewRule(tokens, time.Duration(perMicros)*time.Microsecond, bucketSize)
		if err != nil || rule.Tolerance > MaxTolerance {
			return
		}
		rule.Ceiling = 2 * rule.Tolerance
		var plain atomic.Int64
		plain.Store(bucket.NeverUsed)
		var c countedWord
		now := bucket.Time(0)
		c.init(now)
		admitted, drained := int64(0), int64(0)
		for i := 0; i+2 < len(ops); i += 3 {
			now += bucket.Time(int64(int8(ops[i])) * max(1, rule.Interval/8)) // back in time too
			n := int64(ops[i+2])%min(rule.BucketSize, 70) + 1                 // some past the count field
			switch ops[i+1] % 8 {
			case 0:
				bucket.Debit(&plain, rule, now, n, rule.Tolerance)
				c.debit(rule, now, n, rule.Tolerance)
			case 1:
				bucket.Refund(&plain, rule, now, n)
				before := c.unreported(c.word.Load())
				c.refund(rule, now, n)
				admitted -= before - c.unreported(c.word.Load())
			case 2:
				drained += c.drain(rule, now)
			default:
				want, _ := take(&plain, rule, now, n)
				var got render.Decision
				_, ok := c.take(&got, rule, now, n, noShare)
				if !ok || got != want {
					t.Fatalf("take(%d) at %d = %+v, want %+v", n, now, got, want)
				}
				if got.Allowed {
					admitted += n
				}
			}
		}
		if drained += c.drain(rule, now); drained != admitted {
			t.Fatalf("drained %d, admitted %d", drained, admitted)
		}
	})
}
