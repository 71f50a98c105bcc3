package pacer_test

import (
	"fmt"
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
