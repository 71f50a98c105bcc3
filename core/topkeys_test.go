package gopherpace_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/internal/wire"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// traffic is a shuffled mix of a few heavy keys and many light ones, as
// in a storm: heavy keys send heavy requests each, light keys one to
// three.
func traffic(rng *rand.Rand, heavy []string, perHeavy, light int) []string {
	var reqs []string
	for _, k := range heavy {
		for range perHeavy {
			reqs = append(reqs, k)
		}
	}
	for i := range light {
		for range 1 + rng.IntN(3) {
			reqs = append(reqs, fmt.Sprintf("light-%d", i))
		}
	}
	rng.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
	return reqs
}

// In a storm the heaviest keys are listed first, each with a count no
// lower than the truth and no higher than the truth plus its error,
// whatever the number of light keys around them.
func TestTopKeysNameTheHeaviestKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 46))
	heavy := []string{"tenant-a", "tenant-b", "tenant-c", "tenant-d", "tenant-e"}
	l, err := gopherpace.New(gopherpace.WithRate(10, time.Second), gopherpace.WithBucketSize(10),
		gopherpace.WithTopKeys(true), gopherpace.WithLogger(discardLogger))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reqs := traffic(rng, heavy, 600, 20_000)
	start := time.Now()
	deniedTo := map[string]uint64{}
	for i, k := range reqs {
		// Spread over 50 s of one minute, with random gaps.
		at := start.Add(time.Duration(i) * 50 * time.Second / time.Duration(len(reqs)))
		d, err := l.TakeAt(at, k, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			deniedTo[k]++
		}
	}
	denied, admitted := l.TopKeysAt(start.Add(50*time.Second), 5)
	if len(denied) != 5 {
		t.Fatalf("%d denied keys listed, want 5: %v", len(denied), denied)
	}
	for _, k := range denied {
		if !strings.HasPrefix(k.Key, "tenant-") {
			t.Errorf("a light key listed among the most denied: %+v (truth %d; heavy keys were denied %v)", k, deniedTo[k.Key], deniedTo)
		}
		if truth := deniedTo[k.Key]; k.Count < truth || k.Count-k.Error > truth {
			t.Errorf("%s: counted %d with error %d, truly denied %d", k.Key, k.Count, k.Error, truth)
		}
	}
	// Each heavy key was admitted about 10 of 600 a second ... far fewer
	// than denied; the admitted list is sampled, so only its scale is
	// checked: no key is listed at more than it could have been admitted
	// plus its error.
	for _, k := range admitted {
		sent := uint64(strings.Count(strings.Join(reqs, " ")+" ", k.Key+" "))
		if k.Count-k.Error > sent*64 {
			t.Errorf("admitted %+v is over what the key sent (%d) times the sampling", k, sent)
		}
	}
}

// Keys are personal data more often than not: without show, a listing
// names each key by its keyed hash, never by its bytes.
func TestTopKeysHideKeysUnlessShown(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRate(1, time.Second), gopherpace.WithBucketSize(1),
		gopherpace.WithTopKeys(false), gopherpace.WithLogger(discardLogger))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	now := time.Now()
	for range 10 {
		l.TakeAt(now, "alice@example.com", 1)
	}
	denied, _ := l.TopKeysAt(now, 10)
	if len(denied) != 1 || denied[0].Count != 9 || !strings.HasPrefix(denied[0].Key, "#") {
		t.Fatalf("denied: %+v, want one hashed key denied 9 times", denied)
	}
	if strings.Contains(denied[0].Key, "alice") {
		t.Fatalf("the key shows through its hash: %q", denied[0].Key)
	}
}

// A listing covers the current minute and the one before: a storm that
// ended two minutes ago is gone from it.
func TestTopKeysForgetAnEndedStorm(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRate(1, time.Second), gopherpace.WithBucketSize(1),
		gopherpace.WithTopKeys(true), gopherpace.WithLogger(discardLogger))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	now := time.Now()
	for range 100 {
		l.TakeAt(now, "storm", 1)
	}
	if d, _ := l.TopKeysAt(now.Add(time.Minute), 1); len(d) != 1 || d[0].Key != "storm" || d[0].Count != 99 {
		t.Fatalf("a minute on: %+v, want storm with 99", d)
	}
	if d, _ := l.TopKeysAt(now.Add(2*time.Minute+time.Second), 1); len(d) != 0 {
		t.Fatalf("over two minutes on: %+v, want nothing", d)
	}
}

// However many keys pass, a listing holds at most what the summaries
// keep, and each key's bytes are cut to 128.
func TestTopKeysStayBounded(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRate(1, time.Hour), gopherpace.WithBucketSize(1),
		gopherpace.WithTopKeys(true), gopherpace.WithLogger(discardLogger), gopherpace.WithMaxKeys(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	now := time.Now()
	long := strings.Repeat("x", 1000)
	for i := range 50_000 {
		k := fmt.Sprint(i, long)
		l.TakeAt(now, k, 1)
		l.TakeAt(now, k, 1) // the second is denied
	}
	denied, _ := l.TopKeysAt(now, 1_000_000)
	if len(denied) == 0 || len(denied) > 2*16*16 {
		t.Fatalf("%d keys listed, want 1 to %d", len(denied), 2*16*16)
	}
	for _, k := range denied {
		if len(k.Key) > 128 {
			t.Fatalf("a key of %d bytes listed", len(k.Key))
		}
	}
}

// In shadow mode the keys listed as denied are those the limiter would
// deny, though it lets them through.
func TestTopKeysInShadowMode(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRate(1, time.Second), gopherpace.WithBucketSize(1),
		gopherpace.WithTopKeys(true), gopherpace.WithShadowMode(), gopherpace.WithLogger(discardLogger))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	now := time.Now()
	for range 5 {
		if d, _ := l.TakeAt(now, "would-be", 1); !d.Allowed {
			t.Fatal("shadow mode denied")
		}
	}
	if d, _ := l.TopKeysAt(now, 1); len(d) != 1 || d[0].Key != "would-be" || d[0].Count != 4 {
		t.Fatalf("denied: %+v, want would-be with 4", d)
	}
}

// Without WithTopKeys nothing is kept.
func TestTopKeysOffByDefault(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRate(1, time.Second), gopherpace.WithLogger(discardLogger))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Take("k", 1)
	l.Take("k", 1)
	if d, a := l.TopKeys(10); d != nil || a != nil {
		t.Fatalf("TopKeys without the option: %v %v", d, a)
	}
}

// Across a cluster a key's hash is the same on every node (the secret is
// the cluster's), so the nodes' hidden listings merge into the cluster's
// heaviest keys: a tenant spread thinly over three nodes comes first
// although no single node lists it first.
func TestMergeTopKeysAcrossACluster(t *testing.T) {
	net := memtransport.New()
	lims, _ := cluster(t, net, 3, gopherpace.WithRate(30, time.Second), gopherpace.WithBucketSize(3),
		gopherpace.WithTopKeys(false))
	net.Advance(2 * time.Second)
	now := net.Now()
	// "spread" is denied 40 on each node; each node has a local key
	// denied 60 there only.
	for i, l := range lims {
		for range 43 {
			l.TakeAt(now, "spread", 1)
		}
		for range 63 {
			l.TakeAt(now, fmt.Sprint("local-", i), 1)
		}
	}
	var lists [][]gopherpace.KeyCount
	for _, l := range lims {
		d, _ := l.TopKeysAt(now, 10)
		if len(d) < 2 {
			t.Fatalf("a node lists %v", d)
		}
		lists = append(lists, d)
	}
	merged := gopherpace.MergeTopKeys(2, lists...)
	if len(merged) != 2 || merged[0].Count < 100 || merged[0].Count <= merged[1].Count {
		t.Fatalf("merged: %+v, want the spread key first with about 120", merged)
	}
	for _, list := range lists {
		if list[0].Key == merged[0].Key {
			t.Fatalf("a node lists the merged first key first on its own: %+v", list)
		}
		if !slices.ContainsFunc(list, func(k gopherpace.KeyCount) bool { return k.Key == merged[0].Key }) {
			t.Fatalf("the merged first key %s is not the one every node lists: %+v", merged[0].Key, list)
		}
	}
}

// Decisions from many goroutines count every denial once.
func TestTopKeysUnderConcurrentDecisions(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRate(1, time.Hour), gopherpace.WithBucketSize(1),
		gopherpace.WithTopKeys(true), gopherpace.WithLogger(discardLogger))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 1000 {
				l.Take(fmt.Sprint("k", g%2), 1)
			}
		})
	}
	wg.Wait()
	denied, _ := l.TopKeys(2)
	if len(denied) != 2 || denied[0].Count+denied[1].Count != 8000-2 {
		t.Fatalf("denied: %+v, want 7998 denials over k0 and k1", denied)
	}
}

// A 429 storm over ten nodes: five heavy keys among 100,000 light ones,
// each light key sent two or three requests to random nodes at random
// times, and each heavy key sent to one node only (a load balancer that
// hashes by client). Every node lists its own heavy key first, and the
// nodes' lists merged name exactly the five first; and from the top keys
// the nodes send each other (every second), every node lists the five
// first among the cluster's within 2 s of the storm's start, each with
// the count of the node that saw it. Before any node has sent, a node
// lists only its own.
func TestAStormOverTenNodesNamesItsFiveHeavyKeys(t *testing.T) {
	net := memtransport.New(memtransport.WithRandom(46))
	lims, _ := cluster(t, net, 10, gopherpace.WithRate(1, time.Minute), gopherpace.WithBucketSize(1),
		gopherpace.WithTopKeys(false))
	rng := rand.New(rand.NewPCG(46, 10))
	const heavyKeys = 5
	const steps = 2000 // 2 s of virtual time, a millisecond a step
	type hit struct {
		node int
		key  string
	}
	at := make([][]hit, steps)
	for i := range 100_000 {
		k := fmt.Sprint("light-", i)
		for range 2 + rng.IntN(2) {
			s := rng.IntN(steps)
			at[s] = append(at[s], hit{rng.IntN(len(lims)), k})
		}
	}
	for s := range at {
		for i := range heavyKeys {
			at[s] = append(at[s], hit{i, fmt.Sprint("heavy-", i)})
		}
	}
	heavy := map[string]int{} // a heavy key's label, and the node that sees it
	for i := range heavyKeys {
		heavy["#"+strconv.FormatUint(gopherpace.KeyHashOf(gopherpace.TestKeyHashSecret, fmt.Sprint("heavy-", i)), 16)] = i
	}
	isHeavy := func(k gopherpace.KeyCount) bool { _, ok := heavy[k.Key]; return ok }
	start := net.Now()
	found := make([]time.Duration, len(lims))
	for s := range at {
		now := net.Now()
		for _, h := range at[s] {
			lims[h.node].TakeAt(now, h.key, 1)
		}
		net.Advance(time.Millisecond)
		if s%100 != 99 {
			continue
		}
		now = net.Now()
		for i, l := range lims {
			d, _ := l.ClusterTopKeysAt(now, heavyKeys)
			if found[i] == 0 && len(d) == heavyKeys && !slices.ContainsFunc(d, func(k gopherpace.KeyCount) bool { return !isHeavy(k) }) {
				found[i] = now.Sub(start)
			}
			if s < 900 && i >= heavyKeys && slices.ContainsFunc(d, isHeavy) {
				t.Fatalf("node %d lists a heavy key at %v, before any node sent its own: %+v", i, now.Sub(start), d)
			}
		}
	}
	now := net.Now()
	var lists [][]gopherpace.KeyCount
	for i, l := range lims {
		d, _ := l.TopKeysAt(now, 10)
		lists = append(lists, d)
		if i < heavyKeys && (len(d) == 0 || heavy[d[0].Key] != i || d[0].Count < 1000) {
			t.Fatalf("node %d's own list: %+v, want its heavy key first with about 2,000", i, d)
		}
	}
	merged := gopherpace.MergeTopKeys(10, lists...)
	if !slices.ContainsFunc(merged[:heavyKeys], isHeavy) || slices.ContainsFunc(merged[:heavyKeys], func(k gopherpace.KeyCount) bool { return !isHeavy(k) }) ||
		merged[heavyKeys].Count > 300 {
		t.Fatalf("the nodes' lists merged: %+v, want the five heavy keys first and the rest far below", merged)
	}
	for i, l := range lims {
		if found[i] == 0 || found[i] > 2*time.Second {
			d, _ := l.ClusterTopKeysAt(now, 8)
			t.Fatalf("node %d listed the five heavy keys among the cluster's after %v (0: never): %+v", i, found[i], d)
		}
		d, _ := l.ClusterTopKeysAt(now, heavyKeys)
		for _, k := range d {
			// Only node heavy[k.Key] saw the key: the others count what it
			// sent, up to a second before.
			own := lists[heavy[k.Key]][0]
			if k.Count > own.Count || k.Count+1100 < own.Count {
				t.Errorf("node %d counts %s %d, the node that saw it %d", i, k.Key, k.Count, own.Count)
			}
		}
	}
	t.Logf("every node listed the five heavy keys among the cluster's within %v (read every 100 ms)", slices.Max(found))
}

// A node sends its top keys once a second while it has any, each send a
// frame of at most TopKeysSent keys of each list; once its lists empty
// (their windows rolled by), one empty frame clears its peers' copy, and
// it sends nothing more.
func TestTopKeysGossipStopsWithTheStorm(t *testing.T) {
	net := memtransport.New(memtransport.WithRandom(3))
	lims, _ := cluster(t, net, 2, gopherpace.WithRate(1, time.Minute), gopherpace.WithBucketSize(1),
		gopherpace.WithTopKeys(false))
	now := net.Now()
	for i := range 64 * 40 { // 40 keys denied, and admits enough to fill the sampled list
		lims[0].TakeAt(now, fmt.Sprint("k", i%40), 1)
		lims[0].TakeAt(now, fmt.Sprint("a", i), 1)
	}
	net.Advance(1500 * time.Millisecond)
	perSend := gopherpace.TopKeysBytesSent(lims[0])
	d, a := lims[1].ClusterTopKeysAt(net.Now(), 100)
	if len(d) != gopherpace.TopKeysSent || len(a) != gopherpace.TopKeysSent {
		t.Fatalf("the peer lists %d denied and %d admitted keys, want %d of each", len(d), len(a), gopherpace.TopKeysSent)
	}
	t.Logf("a send of %d keys of each list: %d bytes", gopherpace.TopKeysSent, perSend)
	if perSend > 260 {
		t.Errorf("a send of both full lists took %d bytes; operations.md states 251", perSend)
	}
	net.Advance(2*time.Minute + time.Second)
	before := gopherpace.TopKeysBytesSent(lims[0])
	net.Advance(5 * time.Second)
	if d, a := lims[1].ClusterTopKeysAt(net.Now(), 5); len(d) != 0 || len(a) != 0 || gopherpace.TopKeysBytesSent(lims[0]) != before {
		t.Fatalf("after the storm: %v %v, %d bytes sent in 5 s", d, a, gopherpace.TopKeysBytesSent(lims[0])-before)
	}
}

// What a peer sends of its top keys cannot make a node list more than a
// node sends, keys hashed under another secret, lists this release does
// not know, or lists older than it has; garbage is dropped; a goodbye of
// an older incarnation changes nothing, and one of the current
// incarnation takes its lists away at once; a member that goes silent has
// its lists count for 3 s.
func TestTopKeysFromHostilePeers(t *testing.T) {
	net := memtransport.New(memtransport.WithRandom(9))
	evil, err := net.Join("evil")
	if err != nil {
		t.Fatal(err)
	}
	lims, _ := cluster(t, net, 1, gopherpace.WithRate(10, time.Second), gopherpace.WithTopKeys(false))
	a := lims[0]
	net.Advance(time.Second)
	id := gopherpace.TopKeysWireID(gopherpace.DefaultLimiterID)
	keyHashID := gopherpace.KeyHashIDOf(gopherpace.TestKeyHashSecret)
	seq := uint64(0)
	send := func(f wire.GaugeFrame, gauges ...wire.Gauge) {
		seq++
		f.Limiter, f.Seq = id, seq
		if f.Incarnation == 0 {
			f.Incarnation = 100
		}
		b := wire.AppendGaugeHeader(nil, &f, len(gauges))
		for _, g := range gauges {
			b = wire.AppendGauge(b, g)
		}
		if err := evil.Broadcast(b); err != nil {
			t.Fatal(err)
		}
		net.Advance(10 * time.Millisecond)
	}
	listed := func() []gopherpace.KeyCount {
		d, _ := a.ClusterTopKeysAt(net.Now(), 100)
		return d
	}
	var many []wire.Gauge
	for i := range 50 {
		many = append(many, wire.Gauge{Key: uint64(1000 + i), InFlight: int64(100 + i)})
	}
	many = append(many, wire.Gauge{Key: 7, InFlight: 1 << 30, Refusing: 7}) // a list of no release
	send(wire.GaugeFrame{Round: 5, KeyHashID: keyHashID}, many...)
	if got := listed(); len(got) != gopherpace.TopKeysSent || got[0].Count != 109 {
		t.Fatalf("after 50 keys and an unknown list: %+v", got)
	}
	send(wire.GaugeFrame{Round: 6, KeyHashID: keyHashID ^ 1}, wire.Gauge{Key: 1, InFlight: 5000})
	send(wire.GaugeFrame{Round: 4, KeyHashID: keyHashID}, wire.Gauge{Key: 2, InFlight: 6000})
	if got := listed(); len(got) != gopherpace.TopKeysSent || got[0].Count != 109 {
		t.Fatalf("another secret's keys, or an older round, changed the list: %+v", got)
	}
	if err := evil.Broadcast([]byte("GP\x0b\x10garbage")); err != nil {
		t.Fatal(err)
	}
	net.Advance(10 * time.Millisecond)
	send(wire.GaugeFrame{Leaving: true, Incarnation: 99})
	if got := listed(); len(got) != gopherpace.TopKeysSent {
		t.Fatalf("an older incarnation's goodbye took the lists: %+v", got)
	}
	send(wire.GaugeFrame{Leaving: true})
	if got := listed(); len(got) != 0 {
		t.Fatalf("after the goodbye: %+v", got)
	}
	// A member that goes silent: its lists count for 3 s.
	send(wire.GaugeFrame{Round: 1, Incarnation: 200, KeyHashID: keyHashID}, many[:3]...)
	net.Advance(2900 * time.Millisecond)
	if got := listed(); len(got) != 3 {
		t.Fatalf("2.9 s after a member's last send: %+v", got)
	}
	net.Advance(200 * time.Millisecond)
	if got := listed(); len(got) != 0 {
		t.Fatalf("3.1 s after a member's last send: %+v", got)
	}
}
