package gopherpace_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

func ExampleNew() {
	limiter, err := gopherpace.New(
		gopherpace.WithRefillRate(2), // 2 requests per second...
		gopherpace.WithBucketSize(3), // ...in bursts of up to 3
	)
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	for i := 1; i <= 4; i++ {
		ok, retryAfter := limiter.Allow()
		fmt.Println(i, ok, retryAfter.Round(100*time.Millisecond))
	}
	// Output:
	// 1 true 0s
	// 2 true 0s
	// 3 true 0s
	// 4 false 500ms
}

func ExampleLimiter_Wrap() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(1))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "done") })
	srv := httptest.NewServer(limiter.Wrap(mux)) // http.ListenAndServe(":8080", limiter.Wrap(mux))
	defer srv.Close()

	for range 2 {
		resp, err := http.Get(srv.URL + "/work")
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Printf("%d Retry-After=%q\n", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Output:
	// 200 Retry-After=""
	// 429 Retry-After="1"
}

func ExampleLimiter_TakeAt() {
	limiter, err := gopherpace.New(
		gopherpace.WithRefillRate(10),
		gopherpace.WithBucketSize(10),
		gopherpace.WithOverride("tenant-a", 100, 200),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		d, err := limiter.TakeAt(now, tenant, 10) // a request that costs 10 tokens
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s allowed=%v remaining=%d/%d\n", tenant, d.Allowed, d.Remaining, d.BucketSize)
	}
	d, _ := limiter.TakeAt(now, "tenant-b", 1)
	fmt.Printf("tenant-b again: allowed=%v retry after %v\n", d.Allowed, d.RetryAfter)
	// Output:
	// tenant-a allowed=true remaining=190/200
	// tenant-b allowed=true remaining=0/10
	// tenant-b again: allowed=false retry after 100ms
}

// "100 per hour": the hour's tokens at once, then one every 36 seconds.
func ExampleWithRate() {
	limiter, err := gopherpace.New(gopherpace.WithRate(100, time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	t0 := time.Unix(1_700_000_000, 0)
	admitted := 0
	for range 150 {
		if d, _ := limiter.TakeAt(t0, "api-key", 1); d.Allowed {
			admitted++
		}
	}
	d, _ := limiter.TakeAt(t0, "api-key", 1)
	fmt.Println(admitted, d.RetryAfter)
	// Output: 100 36s
}

// Two limits together: 2 a second per IP and 3 an hour per API key. A
// request either one denies spends from neither.
func ExampleCombine() {
	perIP, _ := gopherpace.New(gopherpace.WithRate(2, time.Second))
	perKey, _ := gopherpace.New(gopherpace.WithRate(3, time.Hour))
	defer perIP.Close()
	defer perKey.Close()
	both, err := gopherpace.Combine(perIP, perKey)
	if err != nil {
		log.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	for _, ip := range []string{"198.51.100.1", "198.51.100.1", "198.51.100.1", "198.51.100.2", "198.51.100.3"} {
		d, _ := both.TakeAt(t0, []string{ip, "key-a"}, 1)
		fmt.Println(ip, d.Allowed, d.BucketSize)
	}
	// Output:
	// 198.51.100.1 true 2
	// 198.51.100.1 true 2
	// 198.51.100.1 false 2
	// 198.51.100.2 true 3
	// 198.51.100.3 false 3
}

// Wait for a token instead of failing.
func ExampleLimiter_Wait() {
	limiter, _ := gopherpace.New(gopherpace.WithRate(100, time.Second), gopherpace.WithBucketSize(1))
	defer limiter.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for range 3 {
		if err := limiter.Wait(ctx, "", 1); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("3 calls, the last two 10 ms apart")
	// Output: 3 calls, the last two 10 ms apart
}

// Read a bucket without spending from it, and refill it.
func ExampleLimiter_PeekAt() {
	limiter, _ := gopherpace.New(gopherpace.WithRate(5, time.Minute))
	defer limiter.Close()
	t0 := time.Unix(1_700_000_000, 0)
	limiter.TakeAt(t0, "tenant", 5)
	d := limiter.PeekAt(t0, "tenant")
	fmt.Println(d.Allowed, d.Remaining, d.RetryAfter)
	limiter.ResetAt(t0, "tenant")
	fmt.Println(limiter.PeekAt(t0, "tenant").Remaining)
	// Output:
	// false 0 12s
	// 5
}

// Shadow mode lets everything through and says what it would have denied.
func ExampleWithShadowMode() {
	limiter, _ := gopherpace.New(gopherpace.WithRate(1, time.Second), gopherpace.WithShadowMode(),
		gopherpace.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer limiter.Close()
	t0 := time.Unix(1_700_000_000, 0)
	for range 3 {
		d, _ := limiter.TakeAt(t0, "k", 1)
		fmt.Println(d.Allowed, d.Shadowed)
	}
	fmt.Println(limiter.Stats().ShadowDenials)
	// Output:
	// true false
	// true true
	// true true
	// 2
}

// A refund gives back what was spent, and never more: one of more tokens
// than the key can have spent is refused whole.
func ExampleLimiter_RefundAt() {
	limiter, _ := gopherpace.New(gopherpace.WithRate(10, time.Minute),
		gopherpace.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer limiter.Close()
	t0 := time.Unix(1_700_000_000, 0)
	limiter.TakeAt(t0, "tenant", 4)
	fmt.Println(limiter.RefundAt(t0, "tenant", 4), limiter.PeekAt(t0, "tenant").Remaining)
	err := limiter.RefundAt(t0, "tenant", 1_000_000)
	fmt.Println(errors.Is(err, gopherpace.ErrRefundExceedsSpent), limiter.StatsAt(t0).RefundsRefused)
	// Output:
	// <nil> 10
	// true 1
}

// StatsAt reads a limiter whose callers pass their own times.
func ExampleLimiter_StatsAt() {
	limiter, _ := gopherpace.New(gopherpace.WithRate(10, time.Minute))
	defer limiter.Close()
	t0 := time.Unix(1_700_000_000, 0)
	limiter.TakeAt(t0, "a", 1)
	limiter.TakeAt(t0, "b", 10)
	fmt.Println(limiter.StatsAt(t0).LiveKeys)                      // both owe tokens
	fmt.Println(limiter.StatsAt(t0.Add(6 * time.Second)).LiveKeys) // a has refilled
	// Output:
	// 2
	// 1
}

// Keys are hashed under a secret; pin it to name keys alike across
// limiters or restarts.
func ExampleWithKeyHashSecret() {
	secret := []byte("32 random bytes, the same on every node") // in practice from a secret store
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithKeyHashSecret(secret))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	_, err = gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithKeyHashSecret([]byte("short")))
	fmt.Println(err)
	// Output:
	// gopherpace: WithKeyHashSecret: 5 bytes; the secret must be at least 16 random bytes
}

// An LLM gateway's budget of 1,000 tokens a minute per API key. How many
// tokens a completion uses is known only after it is generated: a request
// is let in while the key's bucket is not empty (PeekAt), and its usage is
// charged afterwards (ChargeAt), which may take the bucket into debt that
// refill repays before the key is let in again.
func ExampleLimiter_ChargeAt() {
	budget, err := gopherpace.New(gopherpace.WithRate(1000, time.Minute), gopherpace.WithBucketSize(1000))
	if err != nil {
		log.Fatal(err)
	}
	defer budget.Close()
	now := time.Now()
	completion := func(key string, used int64) {
		if !budget.PeekAt(now, key).Allowed {
			fmt.Println(key, "denied")
			return
		}
		owed, _ := budget.ChargeAt(now, key, used)
		fmt.Printf("%s used %d tokens, debt repaid in %v\n", key, used, owed)
	}
	completion("key-a", 700)
	completion("key-a", 800) // let in with 300 left: the bucket goes 500 into debt
	completion("key-a", 10)
	now = now.Add(31 * time.Second) // 500 tokens of debt refill in 30 s
	completion("key-a", 10)
	// Output:
	// key-a used 700 tokens, debt repaid in 0s
	// key-a used 800 tokens, debt repaid in 30s
	// key-a denied
	// key-a used 10 tokens, debt repaid in 0s
}

// Shaping instead of refusing: a request whose token refill brings within
// 300 ms waits for it; one due later is refused and spends nothing.
func ExampleLimiter_ReserveAt() {
	limiter, _ := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(3))
	defer limiter.Close()
	now := time.Unix(1_700_000_000, 0)
	for range 7 {
		wait, ok, _ := limiter.ReserveAt(now, "client", 1, 300*time.Millisecond)
		fmt.Println(ok, wait)
	}
	// Output:
	// true 0s
	// true 0s
	// true 0s
	// true 100ms
	// true 200ms
	// true 300ms
	// false 400ms
}

func ExampleLimiter_TopKeys() {
	limiter, err := gopherpace.New(
		gopherpace.WithRate(5, time.Minute), // each key: 5 a minute
		gopherpace.WithTopKeys(true),        // list keys as given (false: by keyed hash)
	)
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	for range 40 {
		limiter.Take("tenant-noisy", 1)
	}
	for range 8 {
		limiter.Take("tenant-quiet", 1)
	}
	denied, _ := limiter.TopKeys(3)
	for _, k := range denied {
		fmt.Println(k.Key, k.Count)
	}
	// Output:
	// tenant-noisy 35
	// tenant-quiet 3
}

// Two nodes of a simulated cluster: tenant-noisy calls node b only, and
// node a lists it among the cluster's top keys once b has sent its own
// (every second), by its hash, since a never saw it.
func ExampleLimiter_ClusterTopKeys() {
	network := memtransport.New()
	var nodes []*gopherpace.Limiter
	for _, name := range []string{"a", "b"} {
		tr, _ := network.Join(name)
		l, err := gopherpace.New(gopherpace.WithRate(5, time.Minute), gopherpace.WithTransport(tr),
			gopherpace.WithTopKeys(true), gopherpace.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			log.Fatal(err)
		}
		defer l.Close()
		nodes = append(nodes, l)
	}
	network.Advance(time.Second)
	for range 40 {
		nodes[1].TakeAt(network.Now(), "tenant-noisy", 1)
	}
	network.Advance(1100 * time.Millisecond) // b sends its top keys
	onB, _ := nodes[1].ClusterTopKeysAt(network.Now(), 1)
	onA, _ := nodes[0].ClusterTopKeysAt(network.Now(), 1)
	fmt.Println(onB[0].Key, onB[0].Count)
	fmt.Println(onA[0].Key == onB[0].Key, strings.HasPrefix(onA[0].Key, "#"), onA[0].Count)
	// Output:
	// tenant-noisy 37
	// false true 37
}

func ExampleMergeTopKeys() {
	// Each node's TopKeys, read from its status page, say.
	nodeA := []gopherpace.KeyCount{{Key: "tenant-1", Count: 90}, {Key: "tenant-2", Count: 70}}
	nodeB := []gopherpace.KeyCount{{Key: "tenant-3", Count: 80}, {Key: "tenant-2", Count: 60}}
	for _, k := range gopherpace.MergeTopKeys(2, nodeA, nodeB) {
		fmt.Println(k.Key, k.Count)
	}
	// Output:
	// tenant-2 130
	// tenant-1 90
}

// At most two calls to the backend at once; the third waits for a slot or
// its deadline. With WithTransport the cap is the cluster's.
func ExampleNewInFlight() {
	backend, err := gopherpace.NewInFlight(2)
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()
	r1, _ := backend.Acquire(context.Background(), "")
	r2, _ := backend.Acquire(context.Background(), "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = backend.Acquire(ctx, "")
	fmt.Println("third:", err)
	r1()
	r2()
	own, _ := backend.Count("")
	fmt.Println("in flight:", own)
	// Output:
	// third: context deadline exceeded
	// in flight: 0
}

// TryAcquire never waits for a slot: a request it refuses gets a 503 or
// a 429 at once.
func ExampleInFlight_TryAcquire() {
	perTenant, _ := gopherpace.NewInFlight(1)
	defer perTenant.Close()
	release, ok := perTenant.TryAcquire("tenant-a")
	fmt.Println(ok)
	_, ok = perTenant.TryAcquire("tenant-a")
	fmt.Println(ok)
	_, ok = perTenant.TryAcquire("tenant-b")
	fmt.Println(ok)
	release()
	// Output:
	// true
	// false
	// true
}
