package gopherpace_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// "100 per hour" as people write it: the whole hour's tokens at once, then
// one every 36 s; a day of it runs in microseconds on explicit time.
func TestRatePerHour(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRate(100, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if tokens, per := l.Rate(); tokens != 100 || per != time.Hour || l.BucketSize() != 100 || l.RefillRate() != 0 {
		t.Fatalf("Rate %d per %v, bucket %d, RefillRate %d", tokens, per, l.BucketSize(), l.RefillRate())
	}
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 100 {
		if d, _ := l.TakeAt(t0, "key", 1); !d.Allowed {
			t.Fatalf("request %d of the hour's 100 denied", i)
		}
	}
	d, _ := l.TakeAt(t0, "key", 1)
	if d.Allowed || d.RetryAfter != 36*time.Second || d.Window != time.Hour {
		t.Fatalf("101st: %+v; want a denial with RetryAfter 36s and Window 1h", d)
	}
	var buf [headers.MaxFields]headers.Field
	r, _ := headers.New(headers.Draft, "hourly")
	if got := r.Append(buf[:0], d, t0); got[1].Value != `"hourly";q=100;w=3600` || got[0].Value != "36" {
		t.Fatalf("fields %v", got)
	}
	if d, _ := l.TakeAt(t0.Add(36*time.Second-time.Nanosecond), "key", 1); d.Allowed {
		t.Fatal("admitted a nanosecond before the next token")
	}
	if d, _ := l.TakeAt(t0.Add(36*time.Second), "key", 1); !d.Allowed {
		t.Fatal("denied when the next token was due")
	}
	// A day of one request every 10 s admits the first hour's 100 plus 100
	// an hour: 2,500 by the end of the day.
	admitted := 101
	for at := 40 * time.Second; at <= 24*time.Hour; at += 10 * time.Second {
		if d, _ := l.TakeAt(t0.Add(at), "key", 1); d.Allowed {
			admitted++
		}
	}
	if admitted != 2500 {
		t.Fatalf("admitted %d over a day, want 2500 (100 at once, then 100 an hour)", admitted)
	}
}

func TestRateValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []gopherpace.Option
		want string
	}{
		{"period too short", []gopherpace.Option{gopherpace.WithRate(1, time.Nanosecond)}, "outside 1µs to 8784h0m0s"},
		{"period too long", []gopherpace.Option{gopherpace.WithRate(1, 367*24*time.Hour)}, "outside"},
		{"no tokens", []gopherpace.Option{gopherpace.WithRate(0, time.Hour)}, "WithRate(0, 1h0m0s): the rate must be at least 1 token per 1h0m0s"},
		{"over a token a nanosecond", []gopherpace.Option{gopherpace.WithRate(2000, time.Microsecond)}, "one token a nanosecond"},
		{"override period", []gopherpace.Option{gopherpace.WithRate(1, time.Hour), gopherpace.WithOverrideRate("k", 1, 0, 1)}, `WithOverrideRate("k", 1, 0s, 1): the period 0s is outside`},
		{"override bucket", []gopherpace.Option{gopherpace.WithRate(1, time.Hour), gopherpace.WithOverrideRate("k", 1, time.Hour, 0)}, "bucket size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gopherpace.New(tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// The extremes of the range are accepted.
	for _, o := range []gopherpace.Option{gopherpace.WithRate(1000, time.Microsecond), gopherpace.WithRate(1, 366*24*time.Hour)} {
		l, err := gopherpace.New(o)
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
}

// An override keeps a period of its own: a tenant with 1,000 a day beside
// a default of 10 a second.
func TestOverrideRatePerDay(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithOverrideRate("tenant", 1000, 24*time.Hour, 50))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t0 := time.Unix(1_700_000_000, 0)
	n := 0
	for range 60 {
		if d, _ := l.TakeAt(t0, "tenant", 1); d.Allowed {
			n++
		}
	}
	d, _ := l.TakeAt(t0, "tenant", 1)
	if n != 50 || d.Window != 72*time.Minute || d.RetryAfter != 86400*time.Second/1000 {
		t.Fatalf("admitted %d at once (want 50); then %+v (want a token every 86.4 s, the bucket refilled in 72 min)", n, d)
	}
}

// A per-minute share holds cluster-wide like a per-second one: 5 nodes on
// the simulated network, each offered its share of 5× the rate for 5
// minutes, admit R·t+B within ±2%, and no minute admits more than R·w+B.
func TestClusteredPerMinuteQuota(t *testing.T) {
	const nodes, tokens, bucketSize = 5, 120, 20 // 120 a minute: 2 a second
	const duration = 5 * time.Minute
	net := memtransport.New(memtransport.WithRandom(11))
	var lims []*gopherpace.Limiter
	for i := range nodes {
		tr, err := net.Join(fmt.Sprint("m", i))
		if err != nil {
			t.Fatal(err)
		}
		l, err := gopherpace.New(gopherpace.WithRate(tokens, time.Minute), gopherpace.WithBucketSize(bucketSize),
			gopherpace.WithTransport(tr), gopherpace.WithLogger(discardLogger))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lims = append(lims, l)
	}
	const step = 5 * time.Millisecond
	perSecond := make([]int, int(duration/time.Second))
	global, keyed := 0, 0
	// Each node offers 2 requests a second to the global bucket and 2 to a
	// key, at phases of its own: 10/s in all, 5× the rate.
	for s := range int(duration / step) {
		now := net.Now()
		for n, l := range lims {
			if (s+n*19)%100 == 0 {
				if d, _ := l.TakeAt(now, "", 1); d.Allowed {
					global++
					perSecond[s*int(step)/int(time.Second)]++
				}
			}
			if (s+n*23+50)%100 == 0 {
				if d, _ := l.TakeAt(now, "api-key", 1); d.Allowed {
					keyed++
				}
			}
		}
		net.Advance(step)
	}
	ideal := float64(tokens)*duration.Minutes() + bucketSize
	for name, got := range map[string]int{"global": global, "keyed": keyed} {
		if errPct := 100 * (float64(got) - ideal) / ideal; math.Abs(errPct) > 2 {
			t.Errorf("%s admitted %d, %+.2f%% off R·t+B = %.0f", name, got, errPct, ideal)
		}
	}
	for start := 0; start+60 <= len(perSecond); start++ {
		sum := 0
		for _, n := range perSecond[start : start+60] {
			sum += n
		}
		if sum > tokens+bucketSize {
			t.Fatalf("the minute from %d s admitted %d, over R·w+B = %d", start, sum, tokens+bucketSize)
		}
	}
	t.Logf("global %d, keyed %d (ideal %.0f)", global, keyed, ideal)
}
