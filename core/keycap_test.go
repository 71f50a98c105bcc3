package gopherpace_test

import (
	"fmt"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// A flood of new keys on one node of a cluster, ten times the key cap:
// the peer stores every count it is sent by evicting the buckets that owe
// the least (none is dropped), keeps a tenant's larger debt through the
// flood, and still gives a newcomer its own bucket.
func TestClusteredKeyCapUnderAFlood(t *testing.T) {
	net := memtransport.New()
	lims, _ := cluster(t, net, 2, gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(5), gopherpace.WithMaxKeys(50))
	a, b := lims[0], lims[1]
	net.Advance(time.Second)
	for spent := 0; spent < 5; net.Advance(10 * time.Millisecond) {
		if d, _ := a.TakeAt(net.Now(), "tenant", 1); d.Allowed {
			spent++
		}
	}
	for i := range 500 {
		if d, _ := a.TakeAt(net.Now(), fmt.Sprint("flood-", i), 1); !d.Allowed {
			t.Fatalf("flood key %d denied its own bucket on a", i)
		}
		if i%10 == 9 {
			net.Advance(5 * time.Millisecond)
		}
	}
	net.Advance(200 * time.Millisecond)
	if d, _ := b.TakeAt(net.Now(), "tenant", 2); d.Allowed {
		t.Fatal("b forgot tenant's debt in the flood")
	}
	if d, _ := b.TakeAt(net.Now(), "newcomer", 1); !d.Allowed {
		t.Fatalf("a newcomer was denied its own bucket on b: %+v", d)
	}
	st := b.Stats()
	t.Logf("b: %d live keys, %d evicted, %d peers' counts dropped", st.LiveKeys, st.KeysEvicted, st.KeysDropped)
	if st.LiveKeys > 50+50/8 || st.KeysEvicted < 400 || st.KeysDropped != 0 {
		t.Fatalf("b: %+v", st)
	}
}
