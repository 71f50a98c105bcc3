package memberpace

import (
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/seeds"
)

// A cold cluster over real memberlist, started as a deployment starts its
// pods: one first, two more 300 ms later (the stagger is the scenario, not
// a wait). The moment every limiter has heard every other, a client sends
// 100 sequential requests (R = B = 100) to the newest node: all of them are
// admitted. Before, the late nodes emptied their buckets when they heard
// the older one, and such a burst got 7 to 78.
func TestAColdClusterAdmitsItsFirstBurstOverMemberlist(t *testing.T) {
	opts := []gopherpace.Option{gopherpace.WithRefillRate(100), gopherpace.WithBucketSize(100)}
	a := node(t, "n0")
	lims := limiters(t, []*Transport{a}, opts...)
	time.Sleep(300 * time.Millisecond)
	s := WithSeeds(seeds.Static{a.GossipAddr()})
	lims = append(lims, limiters(t, []*Transport{node(t, "n1", s), node(t, "n2", s)}, opts...)...)
	eventually(t, 10*time.Second, "every limiter hears every other", func() bool {
		for _, l := range lims {
			if l.Stats().HeardNodes != 3 {
				return false
			}
		}
		return true
	})
	got := 0
	for range 100 {
		if d, err := lims[2].Take("", 1); err != nil {
			t.Fatal(err)
		} else if d.Allowed {
			got++
		}
	}
	if got != 100 {
		t.Fatalf("the first burst of 100 to the newest node got %d", got)
	}
}

// The morning burst: a cluster that has gone quiet (idle limiters send
// nothing) admits a whole bucket sent to one node at once, as a cluster
// that never went quiet does. The node wakes its peers with its first
// report and needs them to answer within a suspicion timeout.
func TestAClusterThatWentQuietAdmitsABurst(t *testing.T) {
	nodes := threeNodes(t)
	lims := limiters(t, nodes, gopherpace.WithRefillRate(100), gopherpace.WithBucketSize(100))
	untilQuiet(t, lims)
	// 150 requests back to back: the bucket's 100, and what refills while
	// they are decided (100/s), no more.
	got, start := 0, time.Now()
	for range 150 {
		if d, err := lims[1].Take("", 1); err != nil {
			t.Fatal(err)
		} else if d.Allowed {
			got++
		}
	}
	refilled := int(time.Since(start).Seconds()*100) + 1
	if got < 100 || got > 100+refilled {
		t.Fatalf("a burst of 150 on a bucket of 100 after the quiet got %d (%d could refill meanwhile)", got, refilled)
	}
}
