package render

import (
	"testing"
	"time"
)

// The draft t= shortcut agrees with NextTokenAfter for every state a bucket
// of any rate can be in.
func TestNextTokenSecondsMatchesNextTokenAfter(t *testing.T) {
	for _, rc := range []struct{ rate, burst int64 }{{1, 1}, {1, 60}, {3, 7}, {1000, 1000}, {1_000_000_000, 5}} {
		interval := (int64(time.Second) + rc.rate - 1) / rc.rate
		window := interval * rc.burst
		step := max(1, window/5000)
		for reset := int64(0); reset <= window; reset += step {
			q := Quota{Allowed: true, Limit: rc.burst, Remaining: (window - reset) / interval,
				ResetAfter: time.Duration(reset), Window: time.Duration(window)}
			if got, want := NextTokenSeconds(q), CeilSeconds(q.NextTokenAfter()); got != want {
				t.Fatalf("rate %d: %+v: t=%d, want %d", rc.rate, q, got, want)
			}
		}
	}
	slow := Quota{Allowed: true, Limit: 2, Remaining: 1, ResetAfter: 90 * time.Second, Window: 120 * time.Second}
	if got := NextTokenSeconds(slow); got != 30 {
		t.Fatalf("one token a minute, 90s to full: t=%d, want 30", got)
	}
}
