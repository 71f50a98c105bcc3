package main

import (
	"log"
	"net/http"
	"net/netip"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/httplimit"
)

func main() {
	limiter, err := gopherpace.New(
		gopherpace.WithRefillRate(10),                    // 10 req/s per client
		gopherpace.WithBucketSize(20),                    // bursts of 20
		gopherpace.WithOverride("203.0.113.7", 100, 200), // one client gets more
	)
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("done\n")) })
	handler := httplimit.New(limiter,
		httplimit.WithTrustedProxies(netip.MustParsePrefix("10.0.0.0/8")), // your load balancers
		httplimit.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }),
	)(mux)
	log.Fatal(http.ListenAndServe(":8080", handler))
}
