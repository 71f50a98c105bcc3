package adapter_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
)

// The heart of an adapter for a framework of your own: check the shared
// options once, then per request work out the key, take, set the fields
// and answer.
func ExampleConfigure() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(1))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	gate, err := adapter.Configure(limiter, "mypace", []adapter.Option{adapter.PolicyName("per-client")})
	if err != nil {
		log.Fatal(err)
	}
	serve := func(w http.ResponseWriter, r *http.Request) {
		var buf [64]byte
		key, err := gate.RequestKey(buf[:0], r)
		if err != nil {
			http.Error(w, "no client address", adapter.Status(err))
			return
		}
		req := adapter.Request{Cost: 1}
		req.Keys[0] = string(key)
		if err := gate.Decide(&req); err != nil {
			http.Error(w, err.Error(), adapter.Status(err))
			return
		}
		if d := req.Decision(); gate.HasFields(d) {
			gate.SetHeaders(w.Header(), &req)
		}
		if !req.Decision().Allowed {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}
	for range 2 {
		w := httptest.NewRecorder()
		serve(w, httptest.NewRequest(http.MethodGet, "/", nil))
		fmt.Println(w.Code, w.Header().Get("RateLimit"))
	}
	// Output:
	// 200 "per-client";r=0;t=1
	// 429 "per-client";r=0;t=1
}
