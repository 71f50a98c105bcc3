package httplimit_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/httplimit"
)

// Limit each client IP to 5 requests per second in bursts of 10, trusting
// X-Forwarded-For only from the load balancers in 10.0.0.0/8, and never
// limiting the health check.
func ExampleNew() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(5), gopherpace.WithBucketSize(10))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	mw, err := httplimit.New(limiter,
		httplimit.WithKeyFunc(httplimit.ClientIPKey(netip.MustParsePrefix("10.0.0.0/8"))),
		httplimit.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }),
		httplimit.WithPolicyName("per-ip"),
	)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	srv := httptest.NewServer(mw.Wrap(mux))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	fmt.Println(resp.Header.Get("RateLimit-Policy"))
	fmt.Println(resp.Header.Get("RateLimit"))
	// Output:
	// 200
	// "per-ip";q=10;w=2
	// "per-ip";r=9;t=1
}
