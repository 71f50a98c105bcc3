package rate_test

import (
	"context"
	"fmt"
	"log"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
	"github.com/pedreviljoen/gopherpace/core/rate"
)

// A program written against golang.org/x/time/rate: only its import line
// changed.
func ExampleNewLimiter() {
	lim := rate.NewLimiter(rate.Every(100*time.Millisecond), 3)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, ms := range []int{0, 0, 0, 0, 100, 150, 200} {
		fmt.Println(ms, lim.AllowN(start.Add(time.Duration(ms)*time.Millisecond), 1))
	}
	// Output:
	// 0 true
	// 0 true
	// 0 true
	// 0 false
	// 100 true
	// 150 false
	// 200 true
}

func ExampleEvery() {
	fmt.Println(rate.Every(250*time.Millisecond), rate.Every(0) == rate.Inf)
	// Output: 4 true
}

// Three replicas of a service share one limit of 100 a second: the same
// program, and one option. (Here the replicas are in one process, over an
// in-memory network; a service passes memberpace's transport.)
func ExampleClustered() {
	network := memtransport.New()
	var replicas []*rate.Limiter
	for _, name := range []string{"a", "b", "c"} {
		tr, err := network.Join(name)
		if err != nil {
			log.Fatal(err)
		}
		lim, err := rate.Build(100, 100, rate.Clustered(tr, gopherpace.WithLimiterID("api")))
		if err != nil {
			log.Fatal(err)
		}
		defer lim.Close()
		replicas = append(replicas, lim)
	}
	network.Advance(time.Second) // they find each other
	allowed := 0
	for range 1000 { // one second, each replica asked 10 times a millisecond
		for _, lim := range replicas {
			for range 10 {
				if lim.AllowN(network.Now(), 1) {
					allowed++
				}
			}
		}
		network.Advance(time.Millisecond)
	}
	// One limit: R·t + B = 200 for the three, within the cluster's 1%
	// (docs/accuracy.md), not 600.
	fmt.Println("within 1% of 200:", allowed >= 198 && allowed <= 202)
	// Output: within 1% of 200: true
}

// ReserveN books tokens ahead and says when to act; CancelAt gives them
// back.
func ExampleLimiter_ReserveN() {
	lim := rate.NewLimiter(10, 2)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fmt.Println(lim.ReserveN(now, 2).DelayFrom(now))
	r := lim.ReserveN(now, 1)
	fmt.Println(r.OK(), r.DelayFrom(now))
	r.CancelAt(now)
	fmt.Println(lim.ReserveN(now, 1).DelayFrom(now))
	fmt.Println(lim.ReserveN(now, 3).OK()) // above the burst
	// Output:
	// 0s
	// true 100ms
	// 100ms
	// false
}

// WaitN blocks until the tokens are there, or fails at once when they
// would come after the context's deadline.
func ExampleLimiter_WaitN() {
	lim := rate.NewLimiter(rate.Every(time.Minute), 1)
	lim.Allow() // spend the one token
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := lim.WaitN(ctx, 1)
	fmt.Println(err != nil, time.Since(start) < 100*time.Millisecond)
	// Output: true true
}

// TokensAt reads the bucket, fractions and debt included; SetLimitAt keeps
// the tokens and changes the refill from then on.
func ExampleLimiter_SetLimitAt() {
	lim := rate.NewLimiter(4, 4)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lim.ReserveN(now, 4)
	lim.ReserveN(now, 2)
	fmt.Println(lim.TokensAt(now))
	lim.SetLimitAt(now, 8)
	fmt.Println(lim.TokensAt(now.Add(250 * time.Millisecond)))
	// Output:
	// -2
	// 0
}

// Build returns an error where NewLimiter would panic: only Clustered can
// be refused.
func ExampleBuild() {
	_, err := rate.Build(10, 1, rate.Clustered(nil))
	fmt.Println(err)
	// Output: rate: Clustered needs a transport
}
