package pacer_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/httplimit"
	"github.com/pedreviljoen/gopherpace/core/pacer"
)

// A client of an API limited to 2 requests a second: with the pacer, the
// program sees no 429, only requests that take a little longer.
func ExampleTransport() {
	limiter, _ := gopherpace.New(gopherpace.WithRefillRate(2), gopherpace.WithBucketSize(1))
	defer limiter.Close()
	api := httptest.NewServer(httplimit.New(limiter)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer api.Close()

	client := &http.Client{Transport: &pacer.Transport{MaxWait: 5 * time.Second}}
	for range 3 {
		resp, err := client.Get(api.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ")
	}
	// Output: 200 200 200
}

// A pacer for another protocol keeps its targets' pauses in a Pauses:
// Hold when a target refuses with a time to come back, Wait before each
// call to it.
func ExamplePauses() {
	var pauses pacer.Pauses
	pauses.Hold("billing.internal:443", time.Now().Add(50*time.Millisecond))

	start := time.Now()
	if err := pauses.Wait(context.Background(), "billing.internal:443", time.Second); err != nil {
		log.Fatal(err)
	}
	fmt.Println("waited at least 50ms:", time.Since(start) >= 50*time.Millisecond)
	_, held := pauses.Until("billing.internal:443")
	fmt.Println("still paused:", held)
	// Output:
	// waited at least 50ms: true
	// still paused: false
}
