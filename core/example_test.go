package gopherpace_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
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
		fmt.Printf("%s allowed=%v remaining=%d/%d\n", tenant, d.Allowed, d.Remaining, d.Limit)
	}
	d, _ := limiter.TakeAt(now, "tenant-b", 1)
	fmt.Printf("tenant-b again: allowed=%v retry after %v\n", d.Allowed, d.RetryAfter)
	// Output:
	// tenant-a allowed=true remaining=190/200
	// tenant-b allowed=true remaining=0/10
	// tenant-b again: allowed=false retry after 100ms
}
