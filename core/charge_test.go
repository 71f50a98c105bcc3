package gopherpace_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// A charge lands whether or not the bucket holds the tokens, the debt is
// repaid by refill before the key is admitted again, and no charge takes
// a bucket further than one bucket beyond empty.
func TestChargeGoesIntoDebtThatRefillRepays(t *testing.T) {
	for _, key := range []string{"", "tenant"} {
		t.Run(fmt.Sprintf("key=%q", key), func(t *testing.T) {
			l, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(10))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			t0 := time.Now()
			if d, _ := l.TakeAt(t0, key, 10); !d.Allowed {
				t.Fatalf("a full bucket refused its size: %+v", d)
			}
			owed, err := l.ChargeAt(t0, key, 5)
			if err != nil || owed != 500*time.Millisecond {
				t.Fatalf("charging 5 tokens to an empty bucket at 10/s: owed %v, %v; want 500ms", owed, err)
			}
			if d, _ := l.TakeAt(t0.Add(599*time.Millisecond), key, 1); d.Allowed {
				t.Fatal("admitted before the debt and one token had refilled")
			}
			if d, _ := l.TakeAt(t0.Add(600*time.Millisecond), key, 1); !d.Allowed {
				t.Fatalf("refused once the debt was repaid and a token refilled: %+v", d)
			}
			// A huge charge stops at one bucket of debt: 1 s at 10/s.
			owed, err = l.ChargeAt(t0.Add(600*time.Millisecond), key, 1<<62)
			if !errors.Is(err, gopherpace.ErrChargeCapped) || owed != time.Second {
				t.Fatalf("a charge of 2^62 tokens: owed %v, %v; want the cap, 1s, and ErrChargeCapped", owed, err)
			}
			if owed, err := l.ChargeAt(t0.Add(600*time.Millisecond), key, 1); !errors.Is(err, gopherpace.ErrChargeCapped) || owed != time.Second {
				t.Fatalf("a charge to a bucket at the cap: owed %v, %v; want 1s and ErrChargeCapped", owed, err)
			}
			again := t0.Add(600*time.Millisecond + time.Second + 100*time.Millisecond)
			if d, _ := l.TakeAt(again.Add(-time.Nanosecond), key, 1); d.Allowed {
				t.Fatal("admitted before the capped debt was repaid")
			}
			if d, _ := l.TakeAt(again, key, 1); !d.Allowed {
				t.Fatalf("a key charged any amount was still refused two windows later: %+v", d)
			}
			if owed, err := l.ChargeAt(again, key, 0); err != nil || owed != 0 {
				t.Fatalf("a charge of 0 reports the debt: %v, %v", owed, err)
			}
			if _, err := l.ChargeAt(again, key, -3); !errors.Is(err, gopherpace.ErrInvalidCost) {
				t.Fatalf("a negative charge: %v, want ErrInvalidCost", err)
			}
			if d := l.PeekAt(again, key); d.Allowed {
				t.Fatalf("a refused negative charge gave tokens back: %+v", d)
			}
		})
	}
}

// A charge on one node is reported to its peers like an admit: the
// others' replicas go into the same debt.
func TestChargeIsGossiped(t *testing.T) {
	for _, key := range []string{"", "tenant"} {
		t.Run(fmt.Sprintf("key=%q", key), func(t *testing.T) {
			net := memtransport.New()
			lims, _ := cluster(t, net, 3, gopherpace.WithRefillRate(100), gopherpace.WithBucketSize(100))
			net.Advance(time.Second) // membership settles
			now := net.Now()
			if _, err := lims[0].ChargeAt(now, key, 150); err != nil {
				t.Fatal(err)
			}
			net.Advance(200 * time.Millisecond)
			now = net.Now()
			for i, l := range lims[1:] {
				// 150 spent, 20 refilled since: 30 of debt, 300 ms (the report lands a little after the charge).
				owed, err := l.ChargeAt(now, key, 0)
				if err != nil || owed < 250*time.Millisecond || owed > 310*time.Millisecond {
					t.Fatalf("peer %d after a 150-token charge on n0: owed %v, %v; want about 300ms", i+1, owed, err)
				}
				if d := l.PeekAt(now, key); d.Allowed {
					t.Fatalf("peer %d would admit while the cluster is in debt: %+v", i+1, d)
				}
			}
		})
	}
}
