package gopherpace_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// Bookings are due in the order they were made, one interval apart once
// the bucket is empty; a booking due past the time allowed is refused and
// spends nothing; a refund gives a booking back.
func TestReserveBooksInOrder(t *testing.T) {
	for _, key := range []string{"", "tenant"} {
		t.Run(fmt.Sprintf("key=%q", key), func(t *testing.T) {
			l, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(5))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			t0 := time.Now()
			for i := range 5 {
				if wait, ok, err := l.ReserveAt(t0, key, 1, 250*time.Millisecond); err != nil || !ok || wait != 0 {
					t.Fatalf("booking %d of a full bucket: %v %v %v", i, wait, ok, err)
				}
			}
			for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
				if wait, ok, _ := l.ReserveAt(t0, key, 1, 250*time.Millisecond); !ok || wait != want {
					t.Fatalf("booking %d ahead: wait %v ok %v, want %v", i, wait, ok, want)
				}
			}
			if wait, ok, _ := l.ReserveAt(t0, key, 1, 250*time.Millisecond); ok || wait != 300*time.Millisecond {
				t.Fatalf("a booking due at 300ms within 250ms: wait %v ok %v, want refused with 300ms", wait, ok)
			}
			if err := l.RefundAt(t0, key, 1); err != nil {
				t.Fatal(err)
			}
			if wait, ok, _ := l.ReserveAt(t0, key, 1, 250*time.Millisecond); !ok || wait != 200*time.Millisecond {
				t.Fatalf("after a booking was given back: wait %v ok %v, want 200ms", wait, ok)
			}
			// However long the caller would wait, a standalone bucket whose
			// window is shorter books 30 s ahead at most.
			n, last := 0, time.Duration(0)
			for {
				wait, ok, _ := l.ReserveAt(t0, key, 1, time.Hour)
				if !ok {
					break
				}
				n, last = n+1, wait
			}
			if n != 298 || last != 30*time.Second {
				t.Fatalf("%d more bookings, the last due in %v; want 298 (300 ms to 30 s)", n, last)
			}
			if _, _, err := l.ReserveAt(t0, key, 6, time.Second); err == nil {
				t.Fatal("a booking above the bucket size was taken")
			}
			st := l.StatsAt(t0)
			if st.Allowed != 306 || st.Denied != 2 {
				t.Fatalf("stats %d allowed, %d denied; want the 306 bookings allowed and the 2 refusals denied", st.Allowed, st.Denied)
			}
		})
	}
}

// A shadow limiter never makes a caller wait.
func TestReserveInShadowModeNeverWaits(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(1), gopherpace.WithShadowMode(),
		gopherpace.WithLogger(discardLogger))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t0 := time.Now()
	for i := range 5 {
		if wait, ok, err := l.ReserveAt(t0, "k", 1, time.Second); err != nil || !ok || wait != 0 {
			t.Fatalf("booking %d in shadow mode: wait %v ok %v %v", i, wait, ok, err)
		}
	}
	if st := l.StatsAt(t0); st.ShadowDenials != 4 {
		t.Fatalf("%d shadow denials, want the 4 it would have delayed", st.ShadowDenials)
	}
}

// Three nodes booking ahead at once, up to 15 times the rate between
// them, evenly and unevenly: what falls due in any window of a second
// stays within R·w + B, as the cluster's admits do, since bookings count
// against each node's cap of unreported admits.
func TestClusteredBookingsKeepTheBound(t *testing.T) {
	const rate, size = 300, 60
	for _, load := range []struct {
		name    string
		perNode [3]int // bookings asked each millisecond
		key     string
	}{{"even, 5x", [3]int{1, 0, 1}, ""}, {"one node busy", [3]int{3, 0, 0}, ""}, {"all busy, 30x", [3]int{3, 3, 3}, ""},
		{"a key, all busy", [3]int{3, 3, 3}, "tenant"}, {"a key, one node busy", [3]int{3, 0, 0}, "tenant"}} {
		t.Run(load.name, func(t *testing.T) {
			net := memtransport.New()
			lims, _ := cluster(t, net, 3, gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(size))
			net.Advance(time.Second)
			start := net.Now()
			var due []time.Duration
			for ms := range 5000 {
				now := net.Now()
				for i, l := range lims {
					k := load.perNode[i]
					if k == 0 && ms%2 == 0 {
						k = 1 // a node with k 0 asks every other millisecond
					}
					for range k {
						if wait, ok, _ := l.ReserveAt(now, load.key, 1, 150*time.Millisecond); ok {
							due = append(due, now.Sub(start)+wait)
						}
					}
				}
				net.Advance(time.Millisecond)
			}
			slices.Sort(due)
			worst, j := 0, 0
			for i := range due {
				for due[i]-due[j] >= time.Second {
					j++
				}
				worst = max(worst, i-j+1)
			}
			bound := rate + size // R·w + B for w = 1 s
			t.Logf("%d booked over 5 s; worst second %d (bound %d)", len(due), worst, bound)
			if worst > bound {
				t.Fatalf("the worst second fell due %d bookings, bound R·w+B = %d", worst, bound)
			}
			if len(due) < 5*rate*9/10 {
				t.Fatalf("only %d booked over 5 s at %d a second", len(due), rate)
			}
		})
	}
}
