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
// options once and build the flow with the framework's hooks; then per
// request decide, and do the framework's I/O for each step.
func ExampleNewFlow() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(1))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	gate, err := adapter.Configure(limiter, "mypace", []adapter.Option{adapter.PolicyName("per-client")})
	if err != nil {
		log.Fatal(err)
	}
	flow, err := adapter.NewFlow(gate, adapter.Hooks[*http.Request]{Peer: adapter.RequestPeer, Forwarded: adapter.RequestForwarded})
	if err != nil {
		log.Fatal(err)
	}
	serve := func(w http.ResponseWriter, r *http.Request) {
		var req adapter.Request
		switch flow.Decide(r, &req) {
		case adapter.Skip:
			return // the next handler
		case adapter.Fail:
			status, msg := adapter.Answer(req.Err())
			http.Error(w, msg, status)
			return
		}
		if gate.HasFields(&req) {
			gate.SetHeaders(w.Header(), &req)
		}
		if !req.Decision().Allowed {
			http.Error(w, adapter.DeniedMessage, adapter.DeniedStatus)
			return
		}
		// the next handler, then flow.Finish(&req, status)
	}
	for range 2 {
		w := httptest.NewRecorder()
		serve(w, httptest.NewRequest(http.MethodGet, "/", nil))
		fmt.Printf("%d %s %q\n", w.Code, w.Header().Get("RateLimit"), w.Body)
	}
	// Output:
	// 200 "per-client";r=0;t=1 ""
	// 429 "per-client";r=0;t=1 "rate limit exceeded\n"
}
