package rlserver

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rate
	}{
		{"10", Rate{10, time.Second}},
		{"0.5", Rate{1, 2 * time.Second}},
		{"2.5", Rate{5, 2 * time.Second}},
		{"0.001", Rate{1, 1000 * time.Second}},
		{"100/m", Rate{100, time.Minute}},
		{"100/minute", Rate{100, time.Minute}},
		{"5000/h", Rate{5000, time.Hour}},
		{"20/d", Rate{20, 24 * time.Hour}},
		{"30/10s", Rate{30, 10 * time.Second}},
		{"1/500ms", Rate{1, 500 * time.Millisecond}},
		{"1.5/m", Rate{3, 2 * time.Minute}},
		{" 7 / s ", Rate{7, time.Second}},
	} {
		got, err := ParseRate(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if again, err := ParseRate(got.String()); err != nil || again != got {
			t.Errorf("ParseRate(%q.String() = %q) = %v, %v; want it back", tc.in, got.String(), again, err)
		}
	}
	for _, bad := range []string{"", "0", "-1", "+3", "0.0", "1.2345", "abc", "10/", "10/week", "10/-1s", "1/367d", "1.5/8784h", "2/1ns", ".", "1e3"} {
		if r, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", bad, r)
		}
	}
}

// /allow's limits take a period from the flags: 30 a minute in a bucket
// of 2 for every key, and one every 2 s for one key, each answered with
// its rate in tokens a second and a wait that matches it.
func TestAllowLimitsPerPeriodFromFlags(t *testing.T) {
	httpAddr, _ := runServer(t, "-rate", "30/m", "-burst", "2", "-limits", "vip=0.5:1")
	base := "http://" + httpAddr + "/allow?key="
	for i, want := range []int{200, 200, 429} {
		r := call(t, http.MethodGet, base+"anyone")
		if r.code != want || !strings.Contains(r.body, `"limit":2,"rate":0.5`) {
			t.Fatalf("request %d for a key at 30/m: %d %s; want %d with limit 2, rate 0.5", i, r.code, r.body, want)
		}
		// A token every 2 s: the wait is 2 s, or 1 s (rounded up) if the
		// requests took over a second on a slow machine.
		if ra := r.header.Get("Retry-After"); want == 429 && ra != "2" && ra != "1" {
			t.Fatalf("Retry-After %q at 30/m; want 2 (or 1)", ra)
		}
	}
	for i, want := range []int{200, 429} {
		r := call(t, http.MethodGet, base+"vip")
		if r.code != want || !strings.Contains(r.body, `"limit":1,"rate":0.5`) {
			t.Fatalf("request %d for vip at 0.5: %d %s; want %d with limit 1, rate 0.5", i, r.code, r.body, want)
		}
	}
}

// A rate the flags cannot take is refused at start, naming the flag.
func TestBadRatesAreRefusedNamingTheFlag(t *testing.T) {
	for _, args := range [][]string{{"-rate", "0"}, {"-rate", "10/week"}, {"-limits", "a=1.23456:1"}, {"-rate", "1/31d"}} {
		_, err := ParseFlags(args, func(string) string { return "" }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "-")) {
			t.Errorf("ParseFlags(%q) = %v; want an error naming %s", args, err, args[0])
		}
	}
}
