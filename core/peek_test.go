package gopherpace_test

import (
	"fmt"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// Peek reads what a one-token Take would find, and never spends.
func TestPeekSpendsNothing(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRate(10, time.Minute), gopherpace.WithBucketSize(3))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t0 := time.Unix(1_700_000_000, 0)
	for _, key := range []string{"", "tenant"} {
		if d := l.PeekAt(t0, key); !d.Allowed || d.Remaining != 3 || d.ResetAfter != 0 {
			t.Fatalf("%q unused: %+v, want a full bucket of 3", key, d)
		}
		for range 100 {
			l.PeekAt(t0, key)
		}
		for i := range 3 {
			if d, _ := l.TakeAt(t0, key, 1); !d.Allowed {
				t.Fatalf("%q: take %d denied after 100 peeks: a peek spent tokens", key, i)
			}
		}
		d := l.PeekAt(t0, key)
		if d.Allowed || d.Remaining != 0 || d.RetryAfter != 6*time.Second || d.ResetAfter != 18*time.Second {
			t.Fatalf("%q spent: %+v, want denied, a token in 6 s, full in 18 s", key, d)
		}
		if d := l.PeekAt(t0.Add(6*time.Second), key); !d.Allowed || d.Remaining != 1 {
			t.Fatalf("%q after 6 s: %+v, want one token", key, d)
		}
	}
}

// Reset refills a bucket at once, keyed or global, standalone or
// clustered (this node's replica).
func TestReset(t *testing.T) {
	net := memtransport.New(memtransport.WithRandom(5))
	tr, err := net.Join("r0")
	if err != nil {
		t.Fatal(err)
	}
	clustered, err := gopherpace.New(gopherpace.WithRate(5, time.Hour), gopherpace.WithTransport(tr), gopherpace.WithLogger(discardLogger))
	if err != nil {
		t.Fatal(err)
	}
	defer clustered.Close()
	standalone, err := gopherpace.New(gopherpace.WithRate(5, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer standalone.Close()
	net.Advance(3 * time.Second) // past the first contact: a lone node in normal mode
	for name, l := range map[string]*gopherpace.Limiter{"standalone": standalone, "clustered": clustered} {
		for _, key := range []string{"", "tenant"} {
			now := net.Now()
			for range 5 {
				l.TakeAt(now, key, 1)
			}
			if d, _ := l.TakeAt(now, key, 1); d.Allowed {
				t.Fatalf("%s %q: admitted past the bucket", name, key)
			}
			net.Advance(100 * time.Millisecond) // the admits are reported
			now = net.Now()
			l.ResetAt(now, key)
			n := 0
			for range 7 {
				if d, _ := l.TakeAt(now, key, 1); d.Allowed {
					n++
				}
			}
			if n != 5 {
				t.Fatalf("%s %q: %d admitted after Reset, want the full bucket of 5", name, key, n)
			}
		}
		l.Reset(fmt.Sprint("never-used-", name)) // a key with no bucket: nothing to do
	}
}
