package httplimit

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// shapedRun offers Poisson arrivals at load times the rate to a shaping
// middleware for span, in a synctest bubble, and returns each request's
// arrival, its delay and its status.
type shapedRequest struct {
	arrived time.Duration
	delay   time.Duration
	status  int
}

func shapedRun(t *testing.T, rate, bucket int64, load float64, span, maxDelay time.Duration, maxQueue int, seed uint64) []shapedRequest {
	var out []shapedRequest
	synctest.Test(t, func(t *testing.T) {
		l, err := gopherpace.New(gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(bucket))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		opts := []Option{WithKeyFunc(GlobalKey), WithMaxDelay(maxDelay)}
		if maxQueue > 0 {
			opts = append(opts, WithMaxQueue(maxQueue))
		}
		h := New(l, opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		rng := rand.New(rand.NewPCG(seed, 7))
		start := time.Now()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for at := time.Duration(0); at < span; {
			gap := time.Duration(rng.ExpFloat64() / (load * float64(rate)) * float64(time.Second))
			time.Sleep(gap)
			at += gap
			wg.Go(func() {
				arrived := time.Since(start)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
				mu.Lock()
				out = append(out, shapedRequest{arrived, time.Since(start) - arrived, w.Code})
				mu.Unlock()
			})
		}
		wg.Wait()
	})
	return out
}

// Shaping at 2 and 5 times the rate: the admitted rate stays at R (no
// second admits more than R·1s + B), no admitted request waits longer
// than the delay allowed, and requests are refused only when their tokens
// are due later than that. With a queue cap, only beyond the queue. Below
// the rate, a bucket of one (a leaky bucket: requests smoothed to the
// rate) turns the bursts of random arrivals into short waits.
func TestShapingHoldsTheRateAndTheDelay(t *testing.T) {
	const rate = 200
	for _, tc := range []struct {
		load     float64
		bucket   int64
		maxDelay time.Duration
		maxQueue int
	}{{2, 50, 250 * time.Millisecond, 0}, {5, 50, 250 * time.Millisecond, 0}, {5, 50, 250 * time.Millisecond, 10},
		{0.8, 1, time.Second, 0}} {
		maxDelay := tc.maxDelay
		reqs := shapedRun(t, rate, tc.bucket, tc.load, 10*time.Second, maxDelay, tc.maxQueue, 1)
		var admitted []time.Duration
		var delays []time.Duration
		refused := 0
		for _, r := range reqs {
			switch r.status {
			case http.StatusOK:
				if r.delay > maxDelay {
					t.Fatalf("load %v: a request admitted after %v, past the %v allowed", tc.load, r.delay, maxDelay)
				}
				admitted = append(admitted, r.arrived+r.delay)
				delays = append(delays, r.delay)
			case http.StatusTooManyRequests:
				if r.delay != 0 {
					t.Fatalf("load %v: a refusal came after %v; refusals are at once", tc.load, r.delay)
				}
				refused++
			default:
				t.Fatalf("status %d", r.status)
			}
		}
		slices.Sort(admitted)
		worst, j := 0, 0
		for i := range admitted {
			for admitted[i]-admitted[j] >= time.Second {
				j++
			}
			worst = max(worst, i-j+1)
		}
		if bound := rate + int(tc.bucket); worst > bound {
			t.Fatalf("load %v: %d admitted in one second, bound R·1s+B = %d", tc.load, worst, bound)
		}
		perSecond := float64(len(admitted)) / 10
		if want := min(tc.load, 1) * rate; perSecond < 0.97*want {
			t.Fatalf("load %v: %.0f admitted a second, want %.0f: shaping wasted tokens", tc.load, perSecond, want)
		}
		slices.Sort(delays)
		p := func(q float64) time.Duration { return delays[int(q*float64(len(delays)-1))] }
		t.Logf("load %.1fx, bucket %d, delay %v, queue cap %d: %d requests, %.0f admitted/s, %d refused; delay p50 %v p90 %v p99 %v max %v",
			tc.load, tc.bucket, maxDelay, tc.maxQueue, len(reqs), perSecond, refused,
			p(0.5).Round(time.Microsecond), p(0.9).Round(time.Microsecond), p(0.99).Round(time.Microsecond), p(1).Round(time.Microsecond))
		if tc.load < 1 && refused > 0 {
			t.Fatalf("load %v with a delay of %v: %d refused; below the rate the wait absorbs the bursts", tc.load, maxDelay, refused)
		}
		if tc.maxQueue > 0 && p(1) > time.Duration(tc.maxQueue+1)*time.Second/rate+time.Millisecond {
			t.Fatalf("queue cap %d: a request waited %v, longer than the queue ahead of it", tc.maxQueue, p(1))
		}
		if tc.load == 2 && tc.maxQueue == 0 && refused > len(reqs)*55/100 {
			t.Fatalf("load 2x: %d of %d refused; the delay should hold back far fewer", refused, len(reqs))
		}
	}
}

// A request whose context ends while it waits gives its tokens back and
// is denied; the next request is not delayed by it.
func TestAWaiterWhoseContextEndsGivesItsTokensBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(1))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		h := New(l, WithKeyFunc(GlobalKey), WithMaxDelay(time.Second))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		serve := func(ctx context.Context) int {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil).WithContext(ctx))
			return w.Code
		}
		if serve(t.Context()) != http.StatusOK {
			t.Fatal("the first request was refused")
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		defer cancel()
		start := time.Now()
		if got := serve(ctx); got != http.StatusTooManyRequests || time.Since(start) != 30*time.Millisecond {
			t.Fatalf("a request whose context ended after 30 ms: %d after %v, want 429 then", got, time.Since(start))
		}
		start = time.Now()
		if got := serve(t.Context()); got != http.StatusOK || time.Since(start) != 70*time.Millisecond {
			t.Fatalf("the next request: %d after %v, want 200 when the token refilled (70ms)", got, time.Since(start))
		}
	})
}

func TestShapingOptionsAreChecked(t *testing.T) {
	l, _ := gopherpace.New(gopherpace.WithRefillRate(10))
	defer l.Close()
	other, _ := gopherpace.New(gopherpace.WithRefillRate(10))
	defer other.Close()
	for name, opts := range map[string][]Option{
		"a queue without a delay": {WithMaxQueue(5)},
		"a delay with WithAlso":   {WithMaxDelay(time.Second), WithAlso(other, nil, "other")},
		"a zero delay":            {WithMaxDelay(0)},
		"an empty queue":          {WithMaxDelay(time.Second), WithMaxQueue(0)},
	} {
		if _, err := Build(l, opts...); err == nil {
			t.Errorf("%s: built", name)
		}
	}
}
