package gopherpace_test

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

func TestClusteredValidation(t *testing.T) {
	net := memtransport.New()
	tr, _ := net.Join("a")
	for name, opts := range map[string][]gopherpace.Option{
		"nil transport":   {gopherpace.WithTransport(nil)},
		"tiny interval":   {gopherpace.WithGossipInterval(time.Microsecond)},
		"huge interval":   {gopherpace.WithGossipInterval(time.Hour)},
		"short grace":     {gopherpace.WithTransport(tr), gopherpace.WithPeerGracePeriod(50 * time.Millisecond)},
		"bad policy":      {gopherpace.WithPartitionPolicy(9)},
		"empty limiterID": {gopherpace.WithLimiterID("")},
		// 2^32 tokens at 10/s take 13 years to refill: fine alone, not clustered.
		"window over 417 days": {gopherpace.WithTransport(tr), gopherpace.WithBucketSize(1 << 32)},
	} {
		if _, err := gopherpace.New(append(opts, gopherpace.WithRefillRate(10))...); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Two limiters with different IDs share each node's transport and keep
// separate cluster-wide counts.
func TestLimitersShareATransport(t *testing.T) {
	net := memtransport.New()
	a, trs := cluster(t, net, 3, gopherpace.WithRefillRate(100), gopherpace.WithLimiterID("a"))
	var b []*gopherpace.Limiter
	for i, tr := range trs {
		l, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithTransport(tr),
			gopherpace.WithLimiterID("b"), gopherpace.WithNodeName(fmt.Sprint("n", i)), gopherpace.WithLogger(discardLogger))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		b = append(b, l)
	}
	admitted := map[string]int{}
	for range 2000 { // 2 s in 1 ms steps, 3 requests per node per step
		now := net.Now()
		for i := range 3 {
			for _, set := range []struct {
				name string
				l    *gopherpace.Limiter
			}{{"a", a[i]}, {"b", b[i]}} {
				if ok, _ := set.l.AllowAt(now); ok {
					admitted[set.name]++
				}
			}
		}
		net.Advance(time.Millisecond)
	}
	// Ideal: B + R·2s = 300 for a, 30 for b; allow a few for staleness.
	if admitted["a"] < 290 || admitted["a"] > 312 || admitted["b"] < 27 || admitted["b"] > 33 {
		t.Fatalf("admitted %v, want about a=300 and b=30", admitted)
	}
	// Each limiter receives its own frames only, and the two send theirs
	// in shared datagrams.
	sa, sb := a[0].Stats(), b[0].Stats()
	if sa.FramesReceived == 0 || sb.FramesReceived == 0 || sa.FramesOtherLimiter != 0 {
		t.Fatalf("stats %+v and %+v: each limiter should get its own frames", sa, sb)
	}
	if sa.DatagramsSent != sb.DatagramsSent || sa.DatagramsSent >= sa.FramesSent+sb.FramesSent {
		t.Fatalf("%d datagrams for %d + %d frames: the limiters do not share datagrams", sa.DatagramsSent, sa.FramesSent, sb.FramesSent)
	}
}

// Keys spread over three nodes add up to one cluster-wide bucket per key,
// and batches bigger than a frame are split.
func TestKeyedGossipAndSplitting(t *testing.T) {
	net := memtransport.New(memtransport.WithMaxFrameSize(400))
	lims, _ := cluster(t, net, 3, gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(30))
	now := net.Now()
	// 300 keys, each spent 10 tokens on every node: 30 per key cluster-wide.
	for k := range 300 {
		for _, l := range lims {
			if d, err := l.TakeAt(now, fmt.Sprint("key-", k), 10); err != nil || !d.Allowed {
				t.Fatalf("key %d: %+v %v", k, d, err)
			}
		}
	}
	net.Advance(200 * time.Millisecond)
	now = net.Now()
	for k := range 300 {
		d, _ := lims[0].TakeAt(now, fmt.Sprint("key-", k), 1)
		if d.Allowed {
			t.Fatalf("key %d still has tokens after the cluster spent its whole bucket", k)
		}
	}
	st := lims[0].Stats()
	// 300 entries of 10 bytes need at least 8 frames of 400 bytes; the
	// network refuses larger ones, which would have left keys undebited.
	if st.FramesSent < 8 {
		t.Fatalf("%d frames sent for 300 keys in 400-byte frames: not split", st.FramesSent)
	}
	if st.KeysDropped != 0 || st.FramesMalformed != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestMalformedFramesAreDroppedAndCounted(t *testing.T) {
	net := memtransport.New()
	lims, _ := cluster(t, net, 1, gopherpace.WithRefillRate(10))
	evil, _ := net.Join("evil")
	for _, junk := range [][]byte{nil, []byte("gp"), []byte("hello world, not a frame"), make([]byte, 1300)} {
		evil.Broadcast(junk)
	}
	// A well-formed frame that carries keyed counts without a sequence number.
	hb := binary.LittleEndian.AppendUint64([]byte("gp\x0b\x00"), gopherpace.WireLimiterID(gopherpace.DefaultLimiterID))
	hb = binary.LittleEndian.AppendUint64(hb, 1)
	hb = append(hb, 0, 0, 0, 0, 0, 0, 1)          // seq 0, totals, demand, level and withheld 0, one entry
	hb = binary.LittleEndian.AppendUint32(hb, 0)  // the key hash's fingerprint
	hb = binary.LittleEndian.AppendUint64(hb, 42) // key hash
	evil.Broadcast(append(hb, 3, 0, 0))           // 3 tokens, none refused, level 0
	net.Advance(10 * time.Millisecond)
	if got := lims[0].Stats().FramesMalformed; got != 5 {
		t.Fatalf("malformed frames counted %d, want 5", got)
	}
	if ok, _ := lims[0].AllowAt(net.Now()); !ok {
		t.Fatal("junk frames changed the bucket")
	}
}

// A node of another release (another wire version) is refused and
// counted, charges nothing, and, speaking no frame this node can read,
// counts as out of reach once its 2 s as a new member are over: the
// rolling-upgrade row of docs/operations.md.
func TestANodeOfAnotherReleaseIsRefusedAndCounted(t *testing.T) {
	net := memtransport.New()
	lims, _ := cluster(t, net, 1, gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(10))
	old, _ := net.Join("old")
	// Version 10's header, claiming a million tokens admitted.
	frame := binary.LittleEndian.AppendUint64([]byte("gp\x0a\x00"), gopherpace.WireLimiterID(gopherpace.DefaultLimiterID))
	frame = binary.LittleEndian.AppendUint64(frame, 1)
	frame = append(frame, 1, 0xc0, 0x84, 0x3d, 0, 0, 0, 0)
	for range 30 {
		old.Broadcast(frame)
		net.Advance(100 * time.Millisecond)
	}
	st := lims[0].Stats()
	if st.FramesOtherVersion != 30 || st.FramesMalformed != 0 {
		t.Fatalf("frames of another version counted %d (malformed %d), want 30 (0)", st.FramesOtherVersion, st.FramesMalformed)
	}
	if st.KnownNodes != 2 || st.VisibleNodes != 1 {
		t.Fatalf("visible/known = %d/%d, want 1/2: the old node is out of reach, not gone", st.VisibleNodes, st.KnownNodes)
	}
	// Nothing was charged: the bucket holds what 3 s of refill and a full
	// start give, less the old node's withheld share (half of the refill
	// once it was out of reach).
	admitted := 0
	for range 20 {
		if ok, _ := lims[0].AllowAt(net.Now()); ok {
			admitted++
		}
	}
	if admitted < 5 {
		t.Fatalf("admitted %d of 20 after a million claimed admits of another version; its frames were charged", admitted)
	}
}

// A member that runs the transport but not this limiter is in sight for
// its first 2 s, then out of reach until the grace period forgets it: the
// row of docs/operations.md for a limiter missing on one replica.
func TestAMemberWithoutThisLimiterIsOutOfReachThenForgotten(t *testing.T) {
	net := memtransport.New()
	lims, _ := cluster(t, net, 1, gopherpace.WithRefillRate(10), gopherpace.WithPeerGracePeriod(5*time.Second))
	net.Join("bare")
	view := func() string {
		st := lims[0].Stats()
		return fmt.Sprintf("%d/%d", st.VisibleNodes, st.KnownNodes)
	}
	net.Advance(time.Second)
	if got := view(); got != "2/2" {
		t.Fatalf("1 s after it joined: visible/known %s, want 2/2", got)
	}
	net.Advance(2 * time.Second)
	if got := view(); got != "1/2" {
		t.Fatalf("3 s after it joined: visible/known %s, want 1/2", got)
	}
	net.Advance(6 * time.Second)
	if got := view(); got != "1/1" {
		t.Fatalf("past the grace period: visible/known %s, want 1/1", got)
	}
}

func TestFailClosedWhenIsolated(t *testing.T) {
	net := memtransport.New()
	lims, _ := cluster(t, net, 3, gopherpace.WithRefillRate(100), gopherpace.WithPartitionPolicy(gopherpace.PartitionFailClosed))
	net.Advance(time.Second)
	net.Isolate("n0")
	net.Advance(300 * time.Millisecond)
	ok, retry := lims[0].AllowAt(net.Now())
	if ok || retry != time.Second {
		t.Fatalf("isolated fail-closed Allow = %v, %v; want false, 1s", ok, retry)
	}
	if d, _ := lims[0].TakeAt(net.Now(), "some-key", 1); d.Allowed {
		t.Fatal("isolated fail-closed node admitted a keyed request")
	}
	if st := lims[0].Stats(); !st.Partitioned || st.VisibleNodes != 1 || st.KnownNodes != 3 {
		t.Fatalf("stats %+v", st)
	}
	// The other side still has each other: they share, not close.
	if ok, _ := lims[1].AllowAt(net.Now()); !ok {
		t.Fatal("a node that still sees a peer closed")
	}
	net.Heal()
	net.Advance(300 * time.Millisecond)
	if ok, _ := lims[0].AllowAt(net.Now()); !ok {
		t.Fatal("still closed after the heal")
	}
}

func TestPartitionLogsWarnThenErrorEvery30sAndInfoOnRecovery(t *testing.T) {
	net := memtransport.New()
	h := &countingHandler{counts: map[slog.Level]int{}}
	trA, _ := net.Join("a")
	trB, _ := net.Join("b")
	a, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithTransport(trA), gopherpace.WithNodeName("a"),
		gopherpace.WithLogger(slog.New(h)), gopherpace.WithPeerGracePeriod(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _ := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithTransport(trB), gopherpace.WithNodeName("b"), gopherpace.WithLogger(discardLogger))
	defer b.Close()
	net.Advance(time.Second)
	net.Isolate("a")
	for range 6500 { // 65 s of requests every 10 ms: none may log
		a.AllowAt(net.Now())
		net.Advance(10 * time.Millisecond)
	}
	net.Heal()
	net.Advance(time.Second)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts[slog.LevelWarn] != 1 || h.counts[slog.LevelError] != 3 || h.counts[slog.LevelInfo] != 1 {
		t.Fatalf("log records by level %v; want 1 WARN (at once), 3 ERROR (at 2, 32 and 62 s) and 1 INFO", h.counts)
	}
}

func TestCloseStopsEveryGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memtransport.New()
		tr, _ := net.Join("a")
		peer, _ := net.Join("b")
		received := 0
		peer.Subscribe(func(string, []byte) { received++ })
		l, err := gopherpace.New(gopherpace.WithRefillRate(1000), gopherpace.WithTransport(hideClock{tr}), gopherpace.WithLogger(discardLogger))
		if err != nil {
			t.Fatal(err)
		}
		for range 50 {
			l.Allow() // crosses the early-flush threshold: a kick timer
			time.Sleep(20 * time.Millisecond)
			net.Advance(20 * time.Millisecond)
		}
		l.Close()
		l.Close() // idempotent
		synctest.Wait()
		if received == 0 {
			t.Fatal("the engine sent nothing on real timers")
		}
		// synctest.Test fails if any goroutine of the bubble is left blocked.
	})
}

func TestGracefulLeaveShrinksMembershipAtOnce(t *testing.T) {
	net := memtransport.New()
	lims, trs := cluster(t, net, 3, gopherpace.WithRefillRate(100))
	net.Advance(time.Second)
	lims[2].Close()
	trs[2].Close()
	net.Advance(100 * time.Millisecond)
	if st := lims[0].Stats(); st.KnownNodes != 2 || st.Partitioned {
		t.Fatalf("after a goodbye: %+v, want 2 known nodes and no partition", st)
	}
}

// A node cut off under fail-closed admits nothing, not even tokens that its
// processors leased before the cut.
func TestFailClosedNeverSpendsLeases(t *testing.T) {
	net := memtransport.New()
	lims, _ := cluster(t, net, 3, gopherpace.WithRefillRate(1_000_000), gopherpace.WithBucketSize(1_000_000),
		gopherpace.WithPartitionPolicy(gopherpace.PartitionFailClosed))
	net.Advance(time.Second)
	net.Isolate("n0")
	net.Advance(300 * time.Millisecond)
	if !gopherpace.LeaseTokens(lims[0], net.Now(), 5) {
		t.Fatal("a bucket of a million does not lease")
	}
	if ok, retry := lims[0].AllowAt(net.Now()); ok || retry != time.Second {
		t.Fatalf("isolated fail-closed Allow = %v, %v; want false, 1s", ok, retry)
	}
	if d, _ := lims[0].TakeAt(net.Now(), "", 1); d.Allowed {
		t.Fatal("isolated fail-closed Take spent a leased token")
	}
	net.Heal()
	net.Advance(300 * time.Millisecond)
	if ok, _ := lims[0].AllowAt(net.Now()); !ok {
		t.Fatal("still closed after the heal")
	}
}

// A node that joins a running cluster does not bring fresh buckets for the
// keys the cluster has spent: each of its keyed replicas comes down to the
// level in the first report of that key. A key the cluster has not used
// keeps its tokens (the newcomer once emptied every key it had touched, and
// refused them for a window).
func TestNewcomerLearnsEachKeysLevel(t *testing.T) {
	net := memtransport.New()
	trA, _ := net.Join("a")
	a, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(10),
		gopherpace.WithTransport(trA), gopherpace.WithLogger(discardLogger))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	net.Advance(time.Second)
	for range 10 {
		if d, _ := a.TakeAt(net.Now(), "spent", 1); !d.Allowed {
			t.Fatal("a was refused within its bucket")
		}
	}
	net.Advance(200 * time.Millisecond) // a's report of them, and its resends, are over
	trB, _ := net.Join("b")
	b, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(10),
		gopherpace.WithTransport(trB), gopherpace.WithLogger(discardLogger))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, key := range []string{"spent", "unused"} {
		if d, _ := b.TakeAt(net.Now(), key, 1); !d.Allowed || d.Remaining != 9 {
			t.Fatalf("%s, before contact: %+v", key, d)
		}
	}
	// Two tokens refill (b's admit is charged to a, its debt): a spends
	// one, and its report names the key's level.
	net.Advance(2 * time.Second)
	if d, _ := a.TakeAt(net.Now(), "spent", 1); !d.Allowed {
		t.Fatalf("a's refilled token was refused: %+v", d)
	}
	net.Advance(100 * time.Millisecond)
	if d, _ := b.TakeAt(net.Now(), "spent", 1); d.Allowed {
		t.Fatalf("the newcomer still had tokens of a key the cluster spent: %+v", d)
	}
	if d, _ := b.TakeAt(net.Now(), "unused", 1); !d.Allowed || d.Remaining < 8 {
		t.Fatalf("a key the cluster never used lost its tokens: %+v", d)
	}
}
