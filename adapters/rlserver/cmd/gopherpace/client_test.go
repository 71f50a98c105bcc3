package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

var (
	allowedTotal = regexp.MustCompile(`"allowed_total":\d+`)
	zeroToFour   = regexp.MustCompile(`"allowed_total":[0-4][,}]`)
)

var summaryLine = regexp.MustCompile(`(\S+) summary: attempts=(\d+) allowed=(\d+) denied=(\d+) errors=(\d+) → work done=(\d+)`)

type tally struct{ attempts, allowed, denied, errors, work int }

func runClient(t *testing.T, args ...string) tally {
	t.Helper()
	var out, errs bytes.Buffer
	if code := run(append([]string{"client"}, args...), nil, &out, &errs); code != 0 {
		t.Fatalf("gopherpace client %v: exit %d: %s", args, code, errs.String())
	}
	m := summaryLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no summary line in %q", out.String())
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	if !bytes.Contains(out.Bytes(), []byte("/allow latency: p50=")) {
		t.Fatalf("no latency line in %q", out.String())
	}
	return tally{n(2), n(3), n(4), n(5), n(6)}
}

// The reference design's experiment, as it is written: a limiter at 10 a
// second with a bucket of 10, and three replicas that each want 20 a
// second of one key. Together they are allowed 10 a second and the
// bucket, not 60 a second: about a third each.
func TestThreeClientsShareOneKey(t *testing.T) {
	bin := build(t)
	p := start(t, bin, "-addr", "127.0.0.1:0", "-rate", "10", "-burst", "10")
	const seconds = 3
	got := make([]tally, 3)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			got[i] = runClient(t, "-id", fmt.Sprint("inst-", i+1), "-limiter", "http://"+p.http, "-rps", "20",
				"-duration", fmt.Sprint(seconds, "s"), "-fail", "closed")
		})
	}
	wg.Wait()
	allowed := 0
	for i, g := range got {
		if g.errors != 0 || g.attempts < 20 || g.work != g.allowed {
			t.Fatalf("inst-%d: %+v", i+1, g)
		}
		allowed += g.allowed
	}
	// R·t + B = 10·4 + 10; a replica starting late loses part of its
	// first second, so the floor is lower.
	if allowed > 10*seconds+10 || allowed < 10*seconds-5 {
		t.Fatalf("three replicas were allowed %d in %d s at 10 a second with a bucket of 10, want at most %d", allowed, seconds, 10*seconds+10)
	}
}

// The limiter stopped mid-run: with -fail open the work goes on through
// the errors; with -fail closed it stops.
func TestFailModesWhenTheLimiterStops(t *testing.T) {
	bin := build(t)
	for _, mode := range []string{"open", "closed"} {
		p := start(t, bin, "-addr", "127.0.0.1:0", "-rate", "1000", "-burst", "1000")
		done := make(chan tally, 1)
		go func() {
			done <- runClient(t, "-limiter", "http://"+p.http, "-rps", "20", "-duration", "3s", "-timeout", "100ms", "-fail", mode)
		}()
		// Stop the limiter once the client has been allowed a few units
		// of work: the rest of its run meets only errors.
		for deadline := time.Now().Add(10 * time.Second); ; {
			if _, body := get(t, "http://"+p.http+"/stats"); allowedTotal.MatchString(body) && !zeroToFour.MatchString(body) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the client was allowed nothing in 10 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		p.stop(t)
		g := <-done
		if g.errors == 0 || g.allowed == 0 {
			t.Fatalf("-fail %s: %+v, want calls allowed before the stop and errors after", mode, g)
		}
		switch mode {
		case "open":
			if g.work != g.allowed+g.errors {
				t.Fatalf("-fail open: %+v; the work should go on through every error", g)
			}
		case "closed":
			if g.work != g.allowed {
				t.Fatalf("-fail closed: %+v; the work should stop at every error", g)
			}
		}
	}
}

func TestClientFlags(t *testing.T) {
	var out, errs bytes.Buffer
	for _, args := range [][]string{{"-rps", "10"}, {"-fail", "maybe"}, {"-fail", "open", "-rps", "0"}, {"-fail", "open", "-limiter", "nowhere"}} {
		errs.Reset()
		if code := run(append([]string{"client"}, args...), nil, &out, &errs); code != 2 || errs.Len() == 0 {
			t.Errorf("client %v: exit %d, %q; want 2 and a message", args, code, errs.String())
		}
	}
}
