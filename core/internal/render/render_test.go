package render

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The draft t= shortcut agrees with NextTokenAfter for every state a bucket
// of any rate can be in.
func TestNextTokenSecondsMatchesNextTokenAfter(t *testing.T) {
	for _, rc := range []struct{ rate, size int64 }{{1, 1}, {1, 60}, {3, 7}, {1000, 1000}, {1_000_000_000, 5}} {
		interval := (int64(time.Second) + rc.rate - 1) / rc.rate
		window := interval * rc.size
		step := max(1, window/5000)
		for reset := int64(0); reset <= window; reset += step {
			q := Decision{Allowed: true, BucketSize: rc.size, Remaining: (window - reset) / interval,
				ResetAfter: time.Duration(reset), Window: time.Duration(window)}
			if got, want := NextTokenSeconds(&q), CeilSeconds(q.NextTokenAfter()); got != want {
				t.Fatalf("rate %d: %+v: t=%d, want %d", rc.rate, q, got, want)
			}
		}
	}
	slow := Decision{Allowed: true, BucketSize: 2, Remaining: 1, ResetAfter: 90 * time.Second, Window: 120 * time.Second}
	if got := NextTokenSeconds(&slow); got != 30 {
		t.Fatalf("one token a minute, 90s to full: t=%d, want 30", got)
	}
}

// Several policies decided together: the draft fields list each, with its
// own quota; Retry-After describes the decision of them all.
func TestRenderMany(t *testing.T) {
	perIP := NewPolicy(Draft, "per-ip")
	perKey := NewPolicy(Draft, "per-key")
	qIP := Decision{Allowed: false, BucketSize: 10, Remaining: 0, RetryAfter: 100 * time.Millisecond, ResetAfter: time.Second, Window: time.Second}
	qKey := Decision{Allowed: true, BucketSize: 100, Remaining: 40, ResetAfter: 36 * time.Minute, Window: time.Hour}
	var f Fields
	f.RenderMany([]Policy{perIP, perKey}, []Decision{qIP, qKey}, qIP, time.Unix(0, 0))
	got := map[string]string{}
	for i := range f.Len() {
		got[f.Name(i)] = f.Value(i)
	}
	want := map[string]string{
		RetryAfter:      "1",
		RateLimitPolicy: `"per-ip";q=10;w=1, "per-key";q=100;w=3600`,
		RateLimit:       `"per-ip";r=0;t=1, "per-key";r=40;t=36`,
	}
	if len(got) != len(want) {
		t.Fatalf("fields %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	h := map[string][]string{}
	f.SetHeader(h)
	if h[RateLimit][0] != want[RateLimit] {
		t.Fatalf("SetHeader: %v", h)
	}
	if n := testing.AllocsPerRun(100, func() {
		f.RenderMany([]Policy{perIP, perKey}, []Decision{qIP, qKey}, qIP, time.Unix(0, 0))
	}); n > 2 {
		t.Errorf("RenderMany allocates %.0f times, want at most 2", n)
	}
	// A value rendered for the first time costs one allocation.
	p := NewPolicy(Draft, "p")
	r := int64(0)
	if n := testing.AllocsPerRun(100, func() {
		r++
		var f Fields
		f.Render(p, Decision{Allowed: true, BucketSize: 1 << 40, Remaining: r, ResetAfter: time.Second, Window: time.Hour}, time.Time{})
	}); n != 1 {
		t.Errorf("a new value costs %.0f allocations, want 1", n)
	}
}

// reference renders q's fields from scratch, as the draft and legacy
// formats define them, for checking the values the tables hand out.
func reference(name string, style Style, q Decision, now time.Time) map[string]string {
	quoted := string(appendSFString(nil, name))
	m := map[string]string{}
	if !q.Allowed {
		m[RetryAfter] = strconv.FormatInt(RetryAfterSeconds(q.RetryAfter), 10)
	}
	if style == Draft || style == Both {
		m[RateLimitPolicy] = quoted + ";q=" + strconv.FormatInt(q.BucketSize, 10) + ";w=" + strconv.FormatInt(max(1, CeilSeconds(q.Window)), 10)
		v := quoted + ";r=" + strconv.FormatInt(q.Remaining, 10)
		if t := CeilSeconds(q.NextTokenAfter()); t > 0 {
			v += ";t=" + strconv.FormatInt(t, 10)
		}
		m[RateLimit] = v
	}
	if style == Legacy || style == Both {
		m[XLimit] = strconv.FormatInt(q.BucketSize, 10)
		m[XRemaining] = strconv.FormatInt(q.Remaining, 10)
		m[XReset] = strconv.FormatInt(now.Add(q.ResetAfter+time.Second-1).Unix(), 10)
	}
	return m
}

// randomDecision is a decision a bucket could make: sizes, remaining
// tokens, windows and times across their ranges, so that values collide
// in the tables' slots.
func randomDecision(rng *rand.Rand) Decision {
	size := []int64{1, 7, 100, 1000, 5000, 1 << 34}[rng.IntN(6)]
	window := time.Duration(min(size, 100_000)) * []time.Duration{time.Millisecond, time.Second, time.Minute}[rng.IntN(3)]
	q := Decision{Allowed: rng.IntN(4) > 0, BucketSize: size, Remaining: rng.Int64N(size + 1), Window: window}
	q.ResetAfter = time.Duration(rng.Int64N(int64(window) + 1))
	if !q.Allowed {
		q.Remaining = 0
		q.RetryAfter = time.Duration(rng.Int64N(int64(3 * time.Minute)))
	}
	return q
}

// Every value found in a table is the one rendering from scratch gives,
// whatever was kept in its slot before, from many goroutines at once.
func TestKeptValuesAreTheRenderedOnes(t *testing.T) {
	for _, style := range []Style{Draft, Legacy, Both, None} {
		p := NewPolicy(style, `a "quoted" name`)
		var wg sync.WaitGroup
		errs := make(chan string, 4)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), uint64(style)))
				for range 5000 {
					q := randomDecision(rng)
					now := time.Unix(1_700_000_000+rng.Int64N(200), rng.Int64N(1e9))
					var f Fields
					f.Render(p, q, now)
					want := reference(`a "quoted" name`, style, q, now)
					if f.Len() != len(want) {
						errs <- fmt.Sprintf("style %d, %+v: %d fields, want %v", style, q, f.Len(), want)
						return
					}
					for i := range f.Len() {
						if f.Value(i) != want[f.Name(i)] {
							errs <- fmt.Sprintf("style %d, %+v: %s = %q, want %q", style, q, f.Name(i), f.Value(i), want[f.Name(i)])
							return
						}
					}
					h := map[string][]string{}
					p.SetHeader(h, q, now)
					for name, v := range want {
						if got := h[name]; len(got) != 1 || got[0] != v || len(h) != len(want) {
							errs <- fmt.Sprintf("style %d, %+v: SetHeader wrote %v, want %v", style, q, h, want)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatal(e)
		}
	}
}

// Responses share a field's []string: a handler that adds to it, or sets
// it anew, changes its own response only.
func TestSharedValuesStayPut(t *testing.T) {
	p := NewPolicy(Draft, "p")
	q := Decision{Allowed: true, BucketSize: 10, Remaining: 3, ResetAfter: time.Second, Window: 2 * time.Second}
	a, b := http.Header{}, http.Header{}
	p.SetHeader(a, q, time.Time{})
	p.SetHeader(b, q, time.Time{})
	a.Add(RateLimit, "extra")
	a.Set(RateLimitPolicy, "other")
	if got := b.Values(RateLimit); len(got) != 1 || got[0] != `"p";r=3;t=1` {
		t.Fatalf("the other response's RateLimit became %q", got)
	}
	if got := b.Get(RateLimitPolicy); got != `"p";q=10;w=2` {
		t.Fatalf("the other response's RateLimit-Policy became %q", got)
	}
}

// An in-flight limit joins the draft fields as its own policy, in the
// draft's concurrent-requests unit, after the rate's; the shared values
// it extends are not written into; the legacy style has no place for it.
func TestAddSlots(t *testing.T) {
	p := NewPolicy(Draft, "per-ip")
	q := Decision{Allowed: true, BucketSize: 10, Remaining: 4, ResetAfter: 600 * time.Millisecond, Window: time.Second}
	var f Fields
	f.Render(p, q, time.Time{})
	policyBefore, limitBefore := f.Value(0), f.Value(1)
	f.AddSlots(100, 37)
	got := map[string]string{}
	for i := range f.Len() {
		got[f.Name(i)] = f.Value(i)
	}
	want := map[string]string{
		RateLimitPolicy: `"per-ip";q=10;w=1, "inflight";q=100;qu="concurrent-requests"`,
		RateLimit:       `"per-ip";r=4;t=1, "inflight";r=37`,
	}
	if len(got) != len(want) || got[RateLimitPolicy] != want[RateLimitPolicy] || got[RateLimit] != want[RateLimit] {
		t.Fatalf("fields %v, want %v", got, want)
	}
	var again Fields
	again.Render(p, q, time.Time{})
	if again.Value(0) != policyBefore || again.Value(1) != limitBefore {
		t.Fatalf("the shared values changed: %q, %q", again.Value(0), again.Value(1))
	}
	// A refusal: Retry-After stays, and no slot is below zero.
	f.Render(p, Decision{BucketSize: 10, RetryAfter: time.Second, Window: time.Second}, time.Time{})
	f.AddSlots(100, -3)
	if v := f.Value(2); v != `"per-ip";r=0;t=1, "inflight";r=0` || f.Value(0) != "1" {
		t.Fatalf("refused: %q %q", f.Value(0), v)
	}
	if n := testing.AllocsPerRun(100, func() {
		f.Render(p, q, time.Time{})
		f.AddSlots(100, 37)
	}); n > 3 {
		t.Errorf("AddSlots allocates %.0f times, want at most 3", n)
	}
	var legacy Fields
	legacy.Render(NewPolicy(Legacy, "per-ip"), q, time.Unix(0, 0))
	n := legacy.Len()
	legacy.AddSlots(100, 37)
	if legacy.Len() != n || legacy.index(RateLimit) >= 0 {
		t.Fatalf("legacy fields changed")
	}
}
