package gopherpace

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

func TestNewValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"no rate", nil, "WithRate (or WithRefillRate) is required"},
		{"zero rate", []Option{WithRefillRate(0)}, "WithRefillRate(0): the rate must be at least 1 token per 1s, got 0"},
		{"negative rate", []Option{WithRefillRate(-1)}, "WithRefillRate(-1): the rate must be at least 1 token"},
		{"negative rate, in WithRate's words", []Option{WithRate(-5, time.Second)}, "WithRate(-5, 1s): the rate must be at least 1 token"},
		{"two rates", []Option{WithRate(10, time.Second), WithRefillRate(20)}, "WithRate(10, 1s) and WithRefillRate(20) both set the rate: keep one"},
		{"absurd rate", []Option{WithRefillRate(1 << 40)}, "above the maximum"},
		{"zero bucket", []Option{WithRefillRate(10), WithBucketSize(0)}, "WithRefillRate(10) with WithBucketSize(0): the bucket size must be at least 1 token"},
		{"absurd bucket", []Option{WithRefillRate(1), WithBucketSize(1 << 50)}, "would take more than 36 years to refill"},
		{"empty node", []Option{WithRefillRate(1), WithNodeName("")}, "node name"},
		{"nil logger", []Option{WithRefillRate(1), WithLogger(nil)}, "logger"},
		{"zero keys", []Option{WithRefillRate(1), WithMaxKeys(0)}, "max keys"},
		{"bad override", []Option{WithRefillRate(1), WithOverride("a", 0, 1)}, `WithOverride("a", 0, 1): the rate must be at least 1 token`},
		{"empty override key", []Option{WithRefillRate(1), WithOverride("", 1, 1)}, "override key"},
		{"nil option", []Option{WithRefillRate(1), nil}, "nil Option"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New(tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, %v; want error containing %q", l, err, tc.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(50))
	if l.BucketSize() != 50 || l.RefillRate() != 50 || l.NodeName() == "" {
		t.Fatalf("defaults: rate %d bucket %d node %q", l.RefillRate(), l.BucketSize(), l.NodeName())
	}
}

func TestAllowSeedSemantics(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(2), WithBucketSize(2))
	for range 2 {
		if ok, _ := l.AllowAt(t0); !ok {
			t.Fatal("burst denied")
		}
	}
	ok, retry := l.AllowAt(t0)
	if ok || retry != 500*time.Millisecond {
		t.Fatalf("AllowAt on empty = %v, %v; want false, 500ms", ok, retry)
	}
	if ok, _ := l.AllowAt(t0.Add(500 * time.Millisecond)); !ok {
		t.Fatal("no refill after 500ms at 2/s")
	}
	// The convenience form uses the real clock.
	l2 := newTestLimiter(t, WithRefillRate(1))
	if ok, _ := l2.Allow(); !ok {
		t.Fatal("first Allow denied")
	}
	if ok, retry := l2.Allow(); ok || retry <= 0 || retry > time.Second {
		t.Fatalf("second Allow = %v, %v", ok, retry)
	}
}

func TestTakeKeysAreIndependent(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(1), WithBucketSize(2))
	for _, key := range []string{"alice", "bob", ""} {
		for i := range 3 {
			d, err := l.TakeAt(t0, key, 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != (i < 2) {
				t.Fatalf("key %q request %d: allowed=%v", key, i, d.Allowed)
			}
		}
	}
	if got := l.StatsAt(t0).LiveKeys; got != 2 {
		t.Fatalf("live keys %d, want 2 (the global bucket is not keyed)", got)
	}
}

func TestTakeCostErrors(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(10), WithBucketSize(5), WithOverride("big", 10, 50))
	if _, err := l.TakeAt(t0, "k", 0); !errors.Is(err, ErrInvalidCost) {
		t.Fatalf("cost 0: %v", err)
	}
	if _, err := l.TakeAt(t0, "", 6); !errors.Is(err, ErrCostExceedsLimit) {
		t.Fatalf("cost 6 > 5: %v", err)
	}
	if d, err := l.TakeAt(t0, "big", 50); err != nil || !d.Allowed {
		t.Fatalf("cost 50 on an override of size 50: %+v %v", d, err)
	}
	if d, _ := l.TakeAt(t0, "k", 5); !d.Allowed {
		t.Fatal("failed takes must not spend tokens")
	}
}

func TestOverrides(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(1), WithBucketSize(1), WithOverride("tenant-a", 100, 200))
	n := 0
	for range 300 {
		if d, _ := l.TakeAt(t0, "tenant-a", 1); d.Allowed {
			n++
		}
	}
	if n != 200 {
		t.Fatalf("tenant-a admitted %d at once, want its bucket of 200", n)
	}
	d, _ := l.TakeAt(t0, "tenant-a", 1)
	if d.BucketSize != 200 || d.RetryAfter != 10*time.Millisecond {
		t.Fatalf("tenant-a decision %+v, want limit 200, retry 10ms", d)
	}
	if d, _ := l.TakeAt(t0, "tenant-b", 1); d.BucketSize != 1 {
		t.Fatalf("tenant-b got limit %d, want the default 1", d.BucketSize)
	}
}

func TestIdleBucketsAreEvicted(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(10), WithBucketSize(10))
	for i := range 1000 {
		l.TakeAt(t0, fmt.Sprint("k", i), 1)
	}
	if got := l.StatsAt(t0).LiveKeys; got != 1000 {
		t.Fatalf("live keys %d, want 1000", got)
	}
	// 100ms later every bucket is full again; a sweep drops them all.
	l.keys.Sweep(l.bucketNanos(t0.Add(100 * time.Millisecond)))
	if got := l.keys.Len(); got != 0 {
		t.Fatalf("after refill and sweep: %d keys held, want 0", got)
	}
	// Sweeps also happen on their own as new keys arrive.
	for i := range 1000 {
		l.TakeAt(t0.Add(time.Second), fmt.Sprint("a", i), 1)
	}
	for i := range 1000 {
		l.TakeAt(t0.Add(3*time.Second), fmt.Sprint("b", i), 1)
	}
	if got := l.keys.Len(); got > 1000+bucket.ShardCount {
		t.Fatalf("after two generations %d live keys; the idle ones were not swept", got)
	}
}

func TestEvictionNeverDropsAPartlySpentBucket(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(1), WithBucketSize(3))
	l.TakeAt(t0, "k", 3)
	l.keys.Sweep(l.bucketNanos(t0.Add(2 * time.Second)))
	// One token refilled in 2s... at 1/s two did; the third is still owed.
	d, _ := l.TakeAt(t0.Add(2*time.Second), "k", 3)
	if d.Allowed {
		t.Fatal("a sweep reset a bucket that was not full")
	}
}

// At the key cap a new key takes the place of the bucket nearest full of
// a sample, and gets a bucket of its own at once; the evicted key's debt
// is remembered, so it comes back owing what it owed; a flood of new keys
// is decided key by key and never touches a key with a limit of its own.
func TestKeyCapEvictsTheNearestFull(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(1), WithBucketSize(5), WithMaxKeys(100), WithOverride("vip", 100, 500))
	spent := map[string]int64{}
	for i := range 99 {
		k := fmt.Sprint("k", i)
		spent[k] = int64(i%5 + 1)
		l.TakeAt(t0, k, spent[k])
	}
	l.TakeAt(t0, "vip", 400)
	if d, _ := l.TakeAt(t0, "newcomer", 5); !d.Allowed {
		t.Fatal("a new key at the cap was denied its first request")
	}
	if held, evicted := l.keys.Len(), l.Stats().KeysEvicted; held != 100 || evicted != 1 {
		t.Fatalf("held %d, evicted %d: want the cap of 100 and one eviction", held, evicted)
	}
	var gone string
	for k := range spent {
		if l.keys.Lookup(l.hasher.Sum(k)) == nil {
			gone = k
		}
	}
	// The nearest full of 16 sampled: below the median debt but with odds
	// of 2^-16.
	if gone == "" || spent[gone] > 3 {
		t.Fatalf("evicted %q, which had spent %d of 5", gone, spent[gone])
	}
	if d, _ := l.TakeAt(t0, gone, 5-spent[gone]+1); d.Allowed {
		t.Fatalf("%q came back with its debt forgotten", gone)
	}
	if d, _ := l.TakeAt(t0, gone, 5-spent[gone]); !d.Allowed {
		t.Fatalf("%q came back owing more than it spent", gone)
	}
	admitted := 0
	for i := range 10_000 {
		if d, _ := l.TakeAt(t0, fmt.Sprint("flood", i), 5); d.Allowed {
			admitted++
		}
	}
	if held := l.keys.Len(); admitted != 10_000 || held > 100 {
		t.Fatalf("a flood of 10,000 new keys: %d admitted their own bucket (want all), %d held (cap 100)", admitted, held)
	}
	if d, _ := l.TakeAt(t0, "vip", 100); !d.Allowed || d.BucketSize != 500 {
		t.Fatalf("vip after the flood: %+v, want its own bucket of 500 with 100 left", d)
	}
	if d, _ := l.TakeAt(t0, "vip", 1); d.Allowed {
		t.Fatal("vip's bucket was refilled by the flood")
	}
}

// The attacks on the key cap: filling it must not lock out new keys, nor
// mix limits, nor refill anyone.
func TestKeyCapLocksNobodyOut(t *testing.T) {
	t.Run("a day's quota spent by more keys than the cap", func(t *testing.T) {
		// 101 keys spend a day's 1,000 each against a cap of 100; alice,
		// who comes next, still gets her own bucket, and the keys that were
		// evicted still owe their day's quota.
		l := newTestLimiter(t, WithRate(1000, 24*time.Hour), WithMaxKeys(100))
		for i := range 101 {
			if d, _ := l.TakeAt(t0, fmt.Sprint("crafted-", i), 1000); !d.Allowed {
				t.Fatalf("crafted key %d denied its own bucket", i)
			}
		}
		if d, _ := l.TakeAt(t0, "alice", 1); !d.Allowed {
			t.Fatalf("alice denied her first request: retry after %v", d.RetryAfter)
		}
		for i := range 101 {
			if d, _ := l.TakeAt(t0.Add(time.Minute), fmt.Sprint("crafted-", i), 2); d.Allowed {
				t.Fatalf("crafted key %d got tokens back by being evicted", i)
			}
		}
	})
	t.Run("200,000 keys against a cap of 50,000", func(t *testing.T) {
		// Past the cap, new keys and keys whose buckets refilled (and were
		// swept) each get a bucket of their own.
		l := newTestLimiter(t, WithRefillRate(10), WithBucketSize(10), WithMaxKeys(50_000), WithOverride("tier-1", 1000, 5000))
		l.TakeAt(t0, "tenant", 10)
		l.TakeAt(t0, "tier-1", 5000)
		for i := range 200_000 {
			if d, _ := l.TakeAt(t0.Add(time.Duration(i)*time.Microsecond), fmt.Sprint("flood-", i), 10); !d.Allowed {
				t.Fatalf("flood key %d denied its own bucket", i)
			}
		}
		now := t0.Add(time.Second) // tenant's bucket has refilled
		if d, _ := l.TakeAt(now, "new tenant", 10); !d.Allowed {
			t.Fatal("a new tenant was denied its own bucket after the flood")
		}
		if d, _ := l.TakeAt(now, "tenant", 10); !d.Allowed || d.BucketSize != 10 {
			t.Fatal("a refilled tenant was denied its own bucket after the flood")
		}
		// tier-1 owed 4,000 tokens at 1,000 a second, far more than any
		// flood key: its bucket is never the one evicted.
		if d, _ := l.TakeAt(now, "tier-1", 1001); d.Allowed {
			t.Fatal("tier-1's debt was forgotten in the flood")
		}
		if d, _ := l.TakeAt(now, "tier-1", 1000); !d.Allowed || d.BucketSize != 5000 {
			t.Fatalf("tier-1 after the flood: %+v, want its own limit's 1,000 refilled tokens", d)
		}
		if held, evicted := l.keys.Len(), l.Stats().KeysEvicted; held > 50_000 || evicted < 150_000 {
			t.Fatalf("%d keys held (cap 50,000), %d evicted", held, evicted)
		}
	})
	t.Run("a cap of one, a VIP and a default key taking turns", func(t *testing.T) {
		// The two evict each other at every turn, and each is decided on
		// its own bucket, by its own limit: the default key (1 a second, a
		// bucket of 1,000) gets at most 1,001 tokens in a second, and the
		// VIP is never denied.
		l := newTestLimiter(t, WithRefillRate(1), WithBucketSize(1000), WithMaxKeys(1), WithOverride("vip", 100, 5000))
		var defaultTokens int64
		for i := range 2000 {
			now := t0.Add(time.Duration(i) * 500 * time.Microsecond)
			if d, _ := l.TakeAt(now, "someone", 10); d.Allowed {
				defaultTokens += 10
			}
			if d, _ := l.TakeAt(now, "vip", 1); !d.Allowed || d.BucketSize != 5000 {
				t.Fatalf("turn %d: vip %+v, want admitted on its own bucket of 5,000", i, d)
			}
		}
		if defaultTokens > 1001 {
			t.Fatalf("the default key was admitted %d tokens in a second; its limit allows 1,001", defaultTokens)
		}
	})
}

func TestRefund(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(1), WithBucketSize(2))
	l.TakeAt(t0, "k", 2)
	l.RefundAt(t0, "k", 1)
	if d, _ := l.TakeAt(t0, "k", 1); !d.Allowed {
		t.Fatal("refund lost")
	}
	l.TakeAt(t0, "", 2)
	if err := l.RefundAt(t0, "", 4); err != nil {
		t.Fatal(err)
	}
	if d, _ := l.TakeAt(t0, "", 2); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("global refund: %+v", d)
	}
}

func TestLoggerComponentAndNoPerRequestLogs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := newTestLimiter(t, WithRefillRate(1), WithLogger(log), WithNodeName("n1"))
	before := buf.Len()
	if !strings.Contains(buf.String(), "component=gopherpace") {
		t.Fatalf("log lacks component: %q", buf.String())
	}
	for i := range 100 {
		l.TakeAt(t0, fmt.Sprint(i), 1)
		l.AllowAt(t0)
	}
	if buf.Len() != before {
		t.Fatalf("requests were logged: %q", buf.String()[before:])
	}
}

func TestKeyHashSpreadsAndIsStable(t *testing.T) {
	kh := bucket.RandomKeyHasher()
	if kh.Sum("x") == bucket.RandomKeyHasher().Sum("x") {
		t.Fatal("the secret has no effect")
	}
	seen := make(map[uint64]string, 200_000)
	var shards [bucket.ShardCount]int
	for i := range 200_000 {
		k := fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
		h := kh.Sum(k)
		if prev, dup := seen[h]; dup {
			t.Fatalf("collision between %q and %q", prev, k)
		}
		seen[h] = k
		shards[h&(bucket.ShardCount-1)]++
	}
	for i, n := range shards {
		if n < 600 || n > 1000 { // mean 781
			t.Fatalf("shard %d holds %d of 200000 keys; the hash spreads badly", i, n)
		}
	}
}

// The hash secret decides which keys share a bucket: the same on every node
// keeps the cluster's buckets the same, and a different one moves them.
func TestKeyHashSecretSeparatesOverrides(t *testing.T) {
	mk := func(secret []byte) *Limiter {
		return newTestLimiter(t, WithRefillRate(1), WithBucketSize(1), WithOverride("vip", 1, 5), WithKeyHashSecret(secret))
	}
	for _, secret := range [][]byte{[]byte("0123456789abcdef"), []byte("another secret of 32 random bytes")} {
		l := mk(secret)
		if d, _ := l.TakeAt(t0, "vip", 5); !d.Allowed {
			t.Fatalf("secret %q: the override was not found under the same secret", secret)
		}
		if l.rules.ForKey(bucket.NewKeyHasher(append(secret, 'x')).Sum("vip")) != l.rules.Default() {
			t.Fatalf("secret %q: the override answers to another secret's hash", secret)
		}
	}
}

// Take and Refund read the clock themselves.
func TestTakeAndRefundOnTheClock(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(1), WithBucketSize(3))
	if d, err := l.Take("k", 3); err != nil || !d.Allowed {
		t.Fatalf("Take: %+v %v", d, err)
	}
	l.Refund("k", 2)
	if d, _ := l.Take("k", 2); !d.Allowed {
		t.Fatal("the refunded tokens were not there")
	}
}

// Every bad option is reported at once, each in its own words, with one
// package prefix; SetOverride names itself instead of nesting prefixes.
func TestNewReportsEveryBadOption(t *testing.T) {
	_, err := New(WithRefillRate(0), WithMaxKeys(0), WithNodeName(""), WithOverride("k", 1, 0))
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{"WithRefillRate(0)", "WithMaxKeys(0)", "node name must not be empty", `WithOverride("k", 1, 0)`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %s", msg, want)
		}
	}
	l, err := New(WithRefillRate(10))
	if err != nil {
		t.Fatal(err)
	}
	err = l.SetOverride("k", 0, time.Second, 1)
	if err == nil || strings.Count(err.Error(), "gopherpace:") != 1 || !strings.Contains(err.Error(), `SetOverride("k", 0, 1s, 1): the rate must be at least 1 token`) {
		t.Fatalf("SetOverride error %v", err)
	}
	if err := l.SetRate(10, time.Second, 1<<50); err == nil || !strings.Contains(err.Error(), "SetRate(10, 1s, 1125899906842624): a bucket of") || !strings.Contains(err.Error(), "years") {
		t.Fatalf("SetRate error %v", err)
	}
}

// A clustered store at its cap evicts only buckets whose counts have gone
// to the peers: with every bucket holding unsent counts (no tick ever
// runs here) it goes an eighth over the cap, and then denies a new key
// until a flush, never admitting it on no bucket at all.
func TestClusteredKeyCapKeepsUnsentCounts(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(1), WithBucketSize(5), WithMaxKeys(16), WithTransport(&frozenTransport{now: time.Now()}))
	at := l.epoch.Add(time.Second)
	for i := range 18 {
		if d, _ := l.TakeAt(at, fmt.Sprint("k", i), 1); !d.Allowed {
			t.Fatalf("key %d denied with %d live of a cap of 16 (and an eighth)", i, l.Stats().LiveKeys)
		}
	}
	d, _ := l.TakeAt(at, "one too many", 1)
	if d.Allowed || d.RetryAfter < time.Duration(int64(engineOf(l).Tick())) {
		t.Fatalf("a key with no room: %+v, want a denial until the next flush", d)
	}
	if st := l.Stats(); st.LiveKeys != 18 || st.KeysEvicted != 0 {
		t.Fatalf("live %d, evicted %d: a bucket with unsent counts was evicted", st.LiveKeys, st.KeysEvicted)
	}
}

// Buckets that have refilled are not counted live: Stats drops them,
// though no new key arrived to make their shards sweep.
func TestLiveKeysLeaveOutFullBuckets(t *testing.T) {
	for _, clustered := range []bool{false, true} {
		opts := []Option{WithRefillRate(1000), WithBucketSize(1)} // full again 1 ms after a take
		if clustered {
			opts = append(opts, WithTransport(&nopTransport{}))
		}
		l := newTestLimiter(t, opts...)
		for i := range 22 {
			l.Take(fmt.Sprint("k", i), 1)
		}
		if live := l.Stats().LiveKeys; live == 0 {
			t.Fatal("no key live just after taking")
		}
		deadline := time.Now().Add(10 * time.Second)
		for l.Stats().LiveKeys != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("clustered %v: %d keys still counted live 10 s after their buckets refilled", clustered, l.Stats().LiveKeys)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// Evictions at the key cap are said at WARN, at most every 30 s, with the
// count so far.
func TestKeyCapEvictionsAreLogged(t *testing.T) {
	var logs syncLog
	l := newTestLimiter(t, WithRate(1, time.Hour), WithBucketSize(5), WithMaxKeys(10), WithLogger(logs.logger()))
	for i := range 100 {
		l.TakeAt(t0, fmt.Sprint("k", i), 1)
	}
	if n := strings.Count(logs.String(), "the key cap is reached"); n != 1 || l.Stats().KeysEvicted != 90 {
		t.Fatalf("%d WARN records for %d evictions, want 1 for 90", n, l.Stats().KeysEvicted)
	}
	for i := range 10 {
		l.TakeAt(t0.Add(31*time.Second), fmt.Sprint("later", i), 1)
	}
	if n := strings.Count(logs.String(), "the key cap is reached"); n != 2 {
		t.Fatalf("%d WARN records after 31 s more, want 2 (%d evicted):\n%s", n, l.Stats().KeysEvicted, logs.String())
	}
}

// Closing hands the bucket to the standalone word while goroutines keep
// taking: no more than one bucket is admitted across the hand-over, and
// the closed limiter keeps the state it had.
func TestCountedHandBackUnderLoad(t *testing.T) {
	for round := range 20 {
		l, err := New(WithRefillRate(1), WithBucketSize(1000), WithTransport(&nopTransport{}))
		if err != nil {
			t.Fatal(err)
		}
		at := l.epoch.Add(time.Second)
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 600 {
					if g%2 == 0 {
						if ok, _ := l.AllowAt(at); ok {
							admitted.Add(1)
						}
					} else if d, _ := l.TakeAt(at, "", 1); d.Allowed {
						admitted.Add(1)
					}
					if g == 0 && i == 100+round*10 {
						l.Close()
					}
				}
			})
		}
		wg.Wait()
		if got := admitted.Load(); got != 1000 {
			t.Fatalf("round %d: admitted %d across Close, want exactly the bucket of 1000", round, got)
		}
		if ok, _ := l.AllowAt(at.Add(500 * time.Millisecond)); ok {
			t.Fatalf("round %d: the closed limiter forgot its empty bucket", round)
		}
	}
}
