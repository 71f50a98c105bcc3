package gopherpace_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// Shadow mode decides as usual and lets everything through: the requests
// over the limit are marked, counted, spend nothing, and are logged at
// most every 30 s.
func TestShadowMode(t *testing.T) {
	var logs bytes.Buffer
	net := memtransport.New(memtransport.WithRandom(9))
	tr, err := net.Join("s0")
	if err != nil {
		t.Fatal(err)
	}
	for name, extra := range map[string][]gopherpace.Option{"standalone": nil, "clustered": {gopherpace.WithTransport(tr)}} {
		logs.Reset()
		opts := append([]gopherpace.Option{gopherpace.WithRate(3, time.Second), gopherpace.WithShadowMode(),
			gopherpace.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))}, extra...)
		l, err := gopherpace.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		now := net.Now()
		shadowed := 0
		for i := range 10 {
			d, err := l.TakeAt(now, "k", 1)
			if err != nil || !d.Allowed {
				t.Fatalf("%s: request %d: %+v %v; shadow mode never denies", name, i, d, err)
			}
			if d.Shadowed {
				shadowed++
				if d.RetryAfter <= 0 || d.Remaining != 0 {
					t.Fatalf("%s: a shadowed decision must describe the denial: %+v", name, d)
				}
			}
		}
		for range 5 {
			if ok, retry := l.AllowAt(now); !ok || retry != 0 {
				t.Fatalf("%s: AllowAt denied in shadow mode", name)
			}
		}
		if shadowed != 7 {
			t.Fatalf("%s: %d shadowed of 10 against a bucket of 3, want 7", name, shadowed)
		}
		// What was let through spent nothing: the bucket refills on time.
		net.Advance(2 * time.Second)
		if d, _ := l.TakeAt(net.Now(), "k", 3); !d.Allowed || d.Shadowed {
			t.Fatalf("%s: two seconds later: %+v, want the refilled bucket", name, d)
		}
		if s := l.Stats(); s.ShadowDenials < 7 {
			t.Fatalf("%s: Stats.ShadowDenials %d, want at least 7", name, s.ShadowDenials)
		}
		if n := strings.Count(logs.String(), "shadow mode"); n != 1 {
			t.Fatalf("%s: %d shadow-mode records, want 1 within 30 s:\n%s", name, n, logs.String())
		}
		l.Close()
	}
}
