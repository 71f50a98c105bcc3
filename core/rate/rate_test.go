package rate_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/rate"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

type step struct {
	ms   int
	n    int
	want bool
}

func runAllow(t *testing.T, lim *rate.Limiter, steps []step) {
	t.Helper()
	for i, s := range steps {
		if got := lim.AllowN(at(s.ms), s.n); got != s.want {
			t.Fatalf("step %d: AllowN(%dms, %d) = %v, want %v (tokens %.3f)", i, s.ms, s.n, got, s.want, lim.TokensAt(at(s.ms)))
		}
	}
}

// The contract in x/time/rate's documentation: a bucket of size b, full at
// first, refilled at r a second; n above b is never allowed; n of zero is
// allowed while the bucket is not in debt.
func TestAllowFollowsTheDocumentedBucket(t *testing.T) {
	lim := rate.NewLimiter(4, 2) // a token every 250 ms
	runAllow(t, lim, []step{
		{0, 2, true},
		{0, 1, false},
		{249, 1, false},
		{250, 1, true},
		{250, 0, true},
		{260, 3, false}, // above the burst: never
		{1000, 2, true}, // refilled to 2 (capped at the burst), not 3
		{1000, 1, false},
		{1500, 2, true},
	})
	if lim.Limit() != 4 || lim.Burst() != 2 {
		t.Fatalf("Limit %v Burst %d", lim.Limit(), lim.Burst())
	}
}

func TestEvery(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want rate.Limit
	}{{0, rate.Inf}, {-time.Second, rate.Inf}, {time.Second, 1}, {250 * time.Millisecond, 4}, {time.Minute, 1.0 / 60}} {
		if got := rate.Every(c.d); math.Abs(float64(got-c.want)) > 1e-12 && got != c.want {
			t.Errorf("Every(%v) = %v, want %v", c.d, got, c.want)
		}
	}
}

func TestZeroLimiterRejectsEverything(t *testing.T) {
	var lim rate.Limiter
	if lim.AllowN(t0, 1) || lim.ReserveN(t0, 1).OK() || lim.TokensAt(t0) != 0 {
		t.Fatal("the zero Limiter allowed an event")
	}
	if lim.Close() != nil {
		t.Fatal("Close of a standalone Limiter failed")
	}
}

// A zero limit spends what the bucket holds and never refills; raising the
// limit refills from then on.
func TestZeroLimitSpendsTheBucketOnce(t *testing.T) {
	lim := rate.NewLimiter(0, 2)
	runAllow(t, lim, []step{{0, 1, true}, {0, 1, true}, {0, 1, false}, {100000, 1, false}})
	if r := lim.ReserveN(at(100000), 1); r.OK() || r.DelayFrom(at(100000)) != rate.InfDuration {
		t.Fatal("a reservation of tokens that never come was OK")
	}
	lim.SetLimitAt(at(100000), 10)
	runAllow(t, lim, []step{{100099, 1, false}, {100100, 1, true}})
}

func TestTinyLimitNeverOverflows(t *testing.T) {
	for _, r := range []rate.Limit{1e-10, 1e-300, rate.Limit(math.SmallestNonzeroFloat64)} {
		lim := rate.NewLimiter(r, 1)
		if !lim.AllowN(t0, 1) || lim.AllowN(t0.Add(100*365*24*time.Hour), 1) {
			t.Fatalf("limit %g: want the one token, then nothing for a century", r)
		}
	}
}

// Inf allows every event, whatever the burst, and spends nothing.
func TestInfIgnoresTheBurst(t *testing.T) {
	lim := rate.NewLimiter(rate.Inf, 0)
	for i := range 100 {
		if !lim.AllowN(at(0), 1_000_000) {
			t.Fatalf("Inf refused at %d", i)
		}
	}
	if r := lim.ReserveN(at(0), 5); !r.OK() || r.DelayFrom(at(0)) != 0 {
		t.Fatal("Inf made a reservation wait")
	}
	if err := lim.WaitN(t.Context(), 1<<30); err != nil {
		t.Fatal(err)
	}
	// Back to a finite limit: full, as time at an infinite rate left it.
	lim.SetBurstAt(at(0), 3)
	lim.SetLimitAt(at(0), 1)
	runAllow(t, lim, []step{{0, 3, true}, {0, 1, false}})
}

// Reservations book ahead: each is due when the refill reaches it, and
// one above the burst is refused, booking nothing.
func TestReservationsAreDueInTurn(t *testing.T) {
	lim := rate.NewLimiter(10, 3) // a token every 100 ms
	for i, c := range []struct{ n, dueMs int }{{3, 0}, {2, 200}, {1, 300}} {
		r := lim.ReserveN(at(0), c.n)
		if !r.OK() || r.DelayFrom(at(0)) != time.Duration(c.dueMs)*time.Millisecond {
			t.Fatalf("reservation %d: ok %v delay %v, want %d ms", i, r.OK(), r.DelayFrom(at(0)), c.dueMs)
		}
	}
	if r := lim.ReserveN(at(0), 4); r.OK() || r.Delay() != rate.InfDuration {
		t.Fatal("a reservation above the burst was OK")
	}
	if got := lim.TokensAt(at(0)); got != -3 {
		t.Fatalf("tokens %v after booking 3 ahead, want -3", got)
	}
	if lim.AllowN(at(299), 0) || !lim.AllowN(at(300), 0) {
		t.Fatal("n=0 must be refused exactly while the bucket is in debt")
	}
}

// Cancel gives back a reservation's tokens less those booked after it,
// never after its time to act, and never past a full bucket.
func TestCancelGivesBackWhatIsStillHeld(t *testing.T) {
	t.Run("the last booking comes back whole", func(t *testing.T) {
		lim := rate.NewLimiter(10, 2)
		lim.ReserveN(at(0), 2)
		r := lim.ReserveN(at(0), 2) // due at 200 ms
		r.CancelAt(at(100))
		if got := lim.TokensAt(at(100)); math.Abs(got-1) > 1e-9 {
			t.Fatalf("tokens %v after cancelling at 100 ms, want 1 (1 refilled, -2 booked, +2 back)", got)
		}
	})
	t.Run("too late", func(t *testing.T) {
		lim := rate.NewLimiter(10, 2)
		lim.ReserveN(at(0), 2)
		r := lim.ReserveN(at(0), 2)
		r.CancelAt(at(201))
		if got := lim.TokensAt(at(201)); math.Abs(got-0.01) > 1e-9 {
			t.Fatalf("a cancel after the time to act gave tokens back: %v", got)
		}
	})
	t.Run("bookings after it are kept", func(t *testing.T) {
		lim := rate.NewLimiter(10, 4)
		lim.ReserveN(at(0), 4)
		a := lim.ReserveN(at(0), 3) // due 300
		lim.ReserveN(at(0), 1)      // due 400
		c := lim.ReserveN(at(0), 1) // due 500
		c.CancelAt(at(100))         // the last: 1 back
		a.CancelAt(at(100))         // 3 less the 1 booked after it: 2 back
		if r := lim.ReserveN(at(100), 3); r.DelayFrom(at(100)) != 400*time.Millisecond {
			t.Fatalf("after the cancels a booking of 3 waits %v, want 400ms", r.DelayFrom(at(100)))
		}
	})
	t.Run("a reservation that is not OK gives nothing", func(t *testing.T) {
		lim := rate.NewLimiter(10, 2)
		lim.ReserveN(at(0), 2)
		lim.ReserveN(at(0), 3).CancelAt(at(0))
		if r := lim.ReserveN(at(0), 2); r.DelayFrom(at(0)) != 200*time.Millisecond {
			t.Fatalf("delay %v, want 200ms", r.DelayFrom(at(0)))
		}
	})
	t.Run("under a limit changed since", func(t *testing.T) {
		lim := rate.NewLimiter(5, 2) // 200 ms a token
		lim.ReserveN(at(0), 2)
		r := lim.ReserveN(at(0), 2) // due 400
		lim.SetLimitAt(at(200), 10) // -1 token at 200 ms, now 100 ms a token
		r.CancelAt(at(200))         // 2 back: 1
		if d := lim.ReserveN(at(200), 2).DelayFrom(at(200)); d != 100*time.Millisecond {
			t.Fatalf("delay %v, want 100ms", d)
		}
	})
}

// SetLimitAt and SetBurstAt keep the tokens the bucket holds at t.
func TestSetLimitAndBurstKeepTheTokens(t *testing.T) {
	lim := rate.NewLimiter(5, 2)
	lim.ReserveN(at(0), 2)
	lim.ReserveN(at(0), 2)      // -2 at 0
	lim.SetLimitAt(at(200), 10) // -1 at 200
	if got := lim.TokensAt(at(200)); math.Abs(got+1) > 1e-9 {
		t.Fatalf("tokens %v after SetLimit, want -1", got)
	}
	if d := lim.ReserveN(at(200), 1).DelayFrom(at(200)); d != 200*time.Millisecond {
		t.Fatalf("delay %v at the new limit, want 200ms", d)
	}
	lim.SetBurstAt(at(400), 5) // 0 at 400, room for 5
	if got := lim.TokensAt(at(400)); math.Abs(got) > 1e-9 {
		t.Fatalf("tokens %v after SetBurst, want 0", got)
	}
	if got := lim.TokensAt(at(2000)); got != 5 {
		t.Fatalf("tokens %v long after, want the new burst, 5", got)
	}
	lim.SetBurstAt(at(2000), 1)
	if got := lim.TokensAt(at(2000)); got != 1 {
		t.Fatalf("tokens %v after shrinking the burst, want 1", got)
	}
}

// x/time/rate's float arithmetic truncated a refill (golang/go#34861);
// ours is integer nanoseconds rounded towards allowing less. A limit whose
// interval is not a whole number of nanoseconds is still allowed its
// first event and then exactly its rate.
func TestNoTruncation(t *testing.T) {
	if !rate.NewLimiter(0.7692307692307693, 1).Allow() {
		t.Fatal("a full bucket refused its first event")
	}
	lim := rate.NewLimiter(3, 1) // 333,333,333.3 ns a token
	allowed := 0
	for ms := 0; ms <= 60_000; ms++ {
		if lim.AllowN(at(ms), 1) {
			allowed++
		}
	}
	// 1 + 3/s for 60 s; the interval rounds up to 333,333,334 ns, which
	// costs the last token of the minute.
	if allowed != 180 {
		t.Fatalf("3/s over 60 s allowed %d, want 180 (the burst plus 179)", allowed)
	}
}

// x/time/rate let a caller whose times alternate before and after the
// last one create tokens (golang/go#56287), and a negative n give tokens
// back (golang/go#54082). Here, over random calls with times that jump
// back, random n (negative, zero, above the burst) and reservations, no
// span ever allows more than burst + limit·span, and no n below zero
// adds a token.
func TestNoCallerCreatesTokens(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		limit := rate.Limit(1 + rng.IntN(50))
		burst := 1 + rng.IntN(10)
		lim := rate.NewLimiter(limit, burst)
		var grants []struct {
			ms int
			n  int
		}
		latest := 0
		for range 400 {
			ms := max(0, latest+rng.IntN(200)-120) // back by up to 120 ms
			latest = max(latest, ms)
			n := rng.IntN(burst+3) - 2
			before := lim.TokensAt(at(ms))
			var ok bool
			if rng.IntN(4) == 0 {
				ok = lim.ReserveN(at(ms), n).OK() && lim.ReserveN(at(ms), 0).DelayFrom(at(ms)) == 0
				if !ok {
					continue
				}
			} else {
				ok = lim.AllowN(at(ms), n)
			}
			if n < 0 && lim.TokensAt(at(ms)) > before {
				t.Fatalf("trial %d: n=%d added tokens: %v to %v", trial, n, before, lim.TokensAt(at(ms)))
			}
			if ok && n > 0 {
				grants = append(grants, struct{ ms, n int }{ms, n})
			}
		}
		// Every window [a, b] of times that granted: at most burst +
		// limit·(b-a) tokens, counting every grant with a time inside.
		for i := range grants {
			for j := range grants {
				a, b := grants[i].ms, grants[j].ms
				if b < a {
					continue
				}
				total := 0
				for _, g := range grants {
					if g.ms >= a && g.ms <= b {
						total += g.n
					}
				}
				if bound := float64(burst) + float64(limit)*float64(b-a)/1000; float64(total) > bound+1e-9 {
					t.Fatalf("trial %d (limit %v burst %d): %d tokens granted at times in [%d, %d] ms, bound %.3f",
						trial, limit, burst, total, a, b, bound)
				}
			}
		}
	}
}

// Sizes at the edges of int and time neither overflow into allowing nor
// panic.
func TestHugeValues(t *testing.T) {
	// A bucket holds at most 36 years of refill: 1.15e9 tokens at 1/s.
	lim := rate.NewLimiter(1, math.MaxInt)
	if lim.AllowN(t0, math.MaxInt) || !lim.AllowN(t0, 1_000_000_000) {
		t.Fatal("a bucket of MaxInt at 1/s: want MaxInt refused and 1e9 allowed")
	}
	if lim.AllowN(t0.Add(time.Hour), 1<<40) {
		t.Fatal("an hour at 1/s refilled 2^40 tokens")
	}
	r := lim.ReserveN(t0.Add(time.Hour), math.MaxInt)
	if r.OK() && r.DelayFrom(t0.Add(time.Hour)) < 100*365*24*time.Hour {
		t.Fatalf("a booking of MaxInt tokens at 1/s is due in %v", r.DelayFrom(t0.Add(time.Hour)))
	}
	fast := rate.NewLimiter(rate.Every(time.Nanosecond), 1)
	if !fast.AllowN(time.Time{}, 1) || !fast.AllowN(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), 1) {
		t.Fatal("a limiter used at year 1 and then year 9999 refused")
	}
	huge := rate.NewLimiter(1e300, 2)
	if !huge.AllowN(t0, 2) || huge.AllowN(t0, 1) || !huge.AllowN(t0.Add(time.Nanosecond), 1) {
		t.Fatal("a limit above 1e9/s must refill one token a nanosecond")
	}
}
