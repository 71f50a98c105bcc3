package gopherpace

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Tenant tiers from a lookup: looked up once per TTL, cached with a
// bound, a changed tier repriced, an invalid one left on the default.
func TestLookupTiers(t *testing.T) {
	var calls atomic.Int64
	tiers := map[string]Quota{"gold": {100, time.Second, 100}, "bad": {0, time.Second, 1}}
	var logs bytes.Buffer
	l := newTestLimiter(t, WithRate(1, time.Second), WithBucketSize(2),
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		WithLookup(func(key string) (Quota, bool) {
			calls.Add(1)
			q, ok := tiers[key]
			return q, ok
		}, 32, time.Minute))
	now := int64(time.Hour)
	admitted := func(key string, n int) (got int) {
		for range n {
			var d Decision
			if _, err := l.take(&d, now, key, 1); err == nil && d.Allowed {
				got++
			}
		}
		return got
	}
	if got := admitted("gold", 150); got != 100 {
		t.Fatalf("gold admitted %d, want its tier's 100", got)
	}
	if got := admitted("free", 5); got != 2 {
		t.Fatalf("a key without a tier admitted %d, want the default 2", got)
	}
	if got := admitted("bad", 5); got != 2 || !strings.Contains(logs.String(), "invalid limit") {
		t.Fatalf("an invalid tier admitted %d (want the default 2); log %q", got, logs.String())
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d lookups, want one per key within the TTL", n)
	}
	// The tier changes; after the TTL the next request looks it up again,
	// and the key's spent tokens are repriced at the new tier.
	tiers["gold"] = Quota{10, time.Second, 10}
	now += int64(time.Minute)
	var d Decision
	l.take(&d, now, "gold", 1)
	if calls.Load() != 4 || !d.Allowed || d.BucketSize != 10 {
		t.Fatalf("after the TTL: %d lookups, %+v; want a new lookup and the new tier", calls.Load(), d)
	}
	// The cache is bounded.
	for i := range 1000 {
		admitted(fmt.Sprint("tenant-", i), 1)
	}
	cached := 0
	for i := range l.lookup.shards {
		cached += len(l.lookup.shards[i].m)
	}
	if cached > 32 {
		t.Fatalf("%d limits cached, over the bound of 32", cached)
	}
}

func TestLookupValidation(t *testing.T) {
	f := func(string) (Quota, bool) { return Quota{}, false }
	for _, o := range []Option{WithLookup(nil, 1, time.Second), WithLookup(f, 0, time.Second), WithLookup(f, 1, 0)} {
		if _, err := New(WithRefillRate(1), o); err == nil {
			t.Error("an invalid lookup was accepted")
		}
	}
}
