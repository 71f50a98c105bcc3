package gopherpace_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// offer gives each limiter Poisson arrivals at PerSecond[i] one-token
// requests a second, decided at their millisecond, for d of virtual time;
// it returns what each admitted.
func offer(net *memtransport.Network, lims []*gopherpace.Limiter, rng *rand.Rand, perSecond []float64, d time.Duration) []int {
	admitted := make([]int, len(lims))
	for range int(d / time.Millisecond) {
		now := net.Now()
		for i, l := range lims {
			for range poisson(rng, perSecond[i]/1000) {
				if ok, _ := l.AllowAt(now); ok {
					admitted[i]++
				}
			}
		}
		net.Advance(time.Millisecond)
	}
	return admitted
}

func sent(lims []*gopherpace.Limiter) (bytes []uint64) {
	for _, l := range lims {
		bytes = append(bytes, l.Stats().BytesSent)
	}
	return bytes
}

// A limiter nobody uses sends nothing once its nodes have gone idle, at
// any cluster size, and every node still counts every other as in sight
// (no partition, no refill withheld). The first requests wake the cluster:
// it admits its rate as a busy one does, and goes quiet again after.
func TestAnUnusedLimiterSendsNothing(t *testing.T) {
	const rate = 1000
	for _, n := range []int{3, 25} {
		t.Run(fmt.Sprint(n, " nodes"), func(t *testing.T) {
			net := memtransport.New(memtransport.WithRandom(uint64(n)))
			lims, _ := cluster(t, net, n, gopherpace.WithRefillRate(rate))
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			net.Advance(3 * time.Second) // idle from the start: quiet after about a second
			before := sent(lims)
			net.Advance(10 * time.Second)
			for i, b := range sent(lims) {
				if b != before[i] {
					t.Fatalf("node %d sent %d bytes in 10 s of idleness", i, b-before[i])
				}
			}
			for i, l := range lims {
				if st := l.Stats(); st.VisibleNodes != int64(n) || st.KnownNodes != int64(n) || st.Partitioned {
					t.Fatalf("node %d while everyone is idle: %d of %d in sight, partitioned %v", i, st.VisibleNodes, st.KnownNodes, st.Partitioned)
				}
			}
			// Three nodes get 3R between them, at random times, for 5 s.
			rates := make([]float64, n)
			rates[0], rates[1], rates[n-1] = rate, rate, rate
			got := sum(offer(net, lims, rng, rates, 5*time.Second))
			if want := 5*rate + rate; math.Abs(float64(got-want)) > 0.01*float64(want) {
				t.Fatalf("woken by load: admitted %d in 5 s, want %d ±1%%", got, want)
			}
			for i, l := range lims {
				if st := l.Stats(); st.VisibleNodes != int64(n) {
					t.Fatalf("node %d under load: %d of %d in sight", i, st.VisibleNodes, n)
				}
			}
			// Grouped (25 nodes), the relayed frames bring news for a few
			// ticks longer, and the nodes go quiet between 4 and 6 s after
			// the load, not 3.
			quietIn := 3 * time.Second
			if n >= gopherpace.GroupsFrom {
				quietIn = 6 * time.Second
			}
			net.Advance(quietIn)
			before = sent(lims)
			net.Advance(5 * time.Second)
			for i, b := range sent(lims) {
				if b != before[i] {
					t.Fatalf("node %d sent %d bytes in 5 s after the load ended", i, b-before[i])
				}
			}
		})
	}
}

// A partition among idle nodes, shorter than the failure detector, is
// found as any other once load comes: a node woken by news stops counting
// its idle peers as in sight until it hears them again. Both sides get
// load; together they admit the rate, plus each side's full replica of
// the bucket (any partition that starts from a full bucket admits that),
// not the rate on each side, as they would if each took the other for
// idle.
func TestAPartitionAmongIdleNodesIsFound(t *testing.T) {
	const rate, bucketSize = 1000, 100
	net := memtransport.New(memtransport.WithRandom(5)) // the failure detector takes 5 s
	lims, _ := cluster(t, net, 5, gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(bucketSize))
	rng := rand.New(rand.NewPCG(5, 5))
	net.Advance(3 * time.Second)
	net.Partition([]string{"n0", "n1", "n2"}, []string{"n3", "n4"})
	net.Advance(time.Second)
	got := offer(net, lims, rng, []float64{2 * rate, 2 * rate, 2 * rate, 2 * rate, 2 * rate}, 3*time.Second)
	total := sum(got)
	t.Logf("admitted %v: %d in 3 s", got, total)
	if bound := 3*rate + 2*bucketSize + rate/10; total > bound {
		t.Fatalf("the two sides admitted %d in 3 s; at most %d (the rate, each side's full replica, a suspicion timeout)", total, bound)
	}
	if total < 3*rate*9/10 {
		t.Fatalf("the two sides admitted %d in 3 s; the rate is %d", total, 3*rate)
	}
	for i, l := range lims {
		if st := l.Stats(); !st.Partitioned {
			t.Fatalf("node %d does not see the partition under load: %+v", i, st)
		}
	}
	net.Heal()
	offer(net, lims, rng, []float64{rate, rate, rate, rate, rate}, time.Second)
	for i, l := range lims {
		if st := l.Stats(); st.Partitioned || st.VisibleNodes != 5 {
			t.Fatalf("node %d after the heal: %d of %d in sight", i, st.VisibleNodes, st.KnownNodes)
		}
	}
}

// A node that joins a cluster gone idle with part of its bucket spent
// hears the level from the idle nodes, which wake for it, and starts from
// there, not from a full bucket.
func TestANewcomerToAnIdleClusterLearnsItsLevel(t *testing.T) {
	const rate, bucketSize = 100, 1000
	net := memtransport.New(memtransport.WithRandom(3))
	lims, _ := cluster(t, net, 3, gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(bucketSize))
	net.Advance(time.Second)
	// Node 0 empties the bucket, a local cap at a time, until it is refused.
	spent := 0
	for {
		ok, _ := lims[0].AllowAt(net.Now())
		if ok {
			spent++
			continue
		}
		if spent >= bucketSize {
			break
		}
		net.Advance(time.Millisecond)
	}
	emptied := net.Now()
	net.Advance(2 * time.Second) // the others hear it, then all go quiet
	before := sent(lims)
	net.Advance(time.Second)
	for i, b := range sent(lims) {
		if b != before[i] {
			t.Fatalf("node %d is not quiet: %d bytes in a second", i, b-before[i])
		}
	}
	tr, err := net.Join("late")
	if err != nil {
		t.Fatal(err)
	}
	late, err := gopherpace.New(gopherpace.WithTransport(tr), gopherpace.WithNodeName("late"), gopherpace.WithLogger(discardLogger),
		gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(bucketSize))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { late.Close() })
	net.Advance(time.Second)
	// The refill since the bucket was emptied: about 400 tokens.
	level := int(net.Now().Sub(emptied).Seconds() * rate)
	// The newcomer takes all it can for 50 ms, a local cap at a time: what
	// the bucket holds and 50 ms of refill, not a full bucket.
	admitted := 0
	for range 50 {
		for range bucketSize {
			if ok, _ := late.AllowAt(net.Now()); !ok {
				break
			}
			admitted++
		}
		net.Advance(time.Millisecond)
	}
	if admitted > level+rate/10 || admitted < level*9/10 {
		t.Fatalf("the newcomer admitted %d in 50 ms; the cluster's bucket held about %d", admitted, level)
	}
}
