package adapter_test

import (
	"errors"
	"fmt"
	"log"
	"net"
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

// For a framework whose headers are not an http.Header (fasthttp's, say):
// most responses carry just the two draft fields, which AdmittedDraft
// gives without rendering; the rest go through RenderRequest.
func ExampleGate_AdmittedDraft() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(2))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	gate, err := adapter.Configure(limiter, "mypace", nil)
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		req := adapter.Request{Cost: 1}
		req.Keys[0] = "client"
		if err := gate.Decide(&req); err != nil {
			log.Fatal(err)
		}
		if policy, limit, ok := gate.AdmittedDraft(&req); ok {
			fmt.Printf("admitted: RateLimit-Policy: %s; RateLimit: %s\n", policy, limit)
			continue
		}
		var f adapter.Fields
		gate.RenderRequest(&f, &req)
		fmt.Printf("denied, %d fields, first %s: %s\n", f.Len(), f.Name(0), f.Value(0))
	}
	// Output:
	// admitted: RateLimit-Policy: "default";q=2;w=2; RateLimit: "default";r=1;t=1
	// admitted: RateLimit-Policy: "default";q=2;w=2; RateLimit: "default";r=0;t=1
	// denied, 3 fields, first Retry-After: 1
}

// A framework that gives the connection's address as a net.Addr hands it
// to the flow through AddrPeer: a TCP peer parsed, any other by name.
func ExampleAddrPeer() {
	for _, a := range []net.Addr{
		&net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 5000},
		&net.UnixAddr{Name: "/run/app.sock", Net: "unix"},
	} {
		addr, name := adapter.AddrPeer(a)
		fmt.Printf("%v %q\n", addr, name)
	}
	// Output:
	// 192.0.2.1 ""
	// invalid IP "/run/app.sock"
}

// An adapter's options, written once: its config is a Config of its
// request type and handler types, and each of its With... functions sets
// one field through the Config's checks; Build gives the gate and the
// flow.
func ExampleConfig() {
	type config = adapter.Config[*http.Request,
		func(http.ResponseWriter, *http.Request, gopherpace.Decision), // deny handler
		func(http.ResponseWriter, *http.Request, error),               // error handler
		func(*http.Request) int64]                                     // usage
	type Option func(*config)
	WithKeyFunc := func(f func(*http.Request) (string, error)) Option { return func(c *config) { c.SetKey(f) } }
	WithPolicyName := func(name string) Option { return func(c *config) { c.Share(adapter.PolicyName(name)) } }

	limiter, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(1))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	build := func(opts ...Option) error {
		var c config
		adapter.Apply(&c, opts, c.Require)
		_, _, err := c.Build(limiter, "mypace", adapter.Hooks[*http.Request]{Peer: adapter.RequestPeer, Forwarded: adapter.RequestForwarded})
		return err
	}
	fmt.Println(build(WithPolicyName("per-tenant"), WithKeyFunc(func(r *http.Request) (string, error) { return r.Header.Get("Tenant"), nil })))
	fmt.Println(build(WithKeyFunc(nil), nil))
	// Output:
	// <nil>
	// mypace: nil KeyFunc
	// mypace: nil Option
}

// An adapter's constructor for inline use is its Build through Must: a
// misconfiguration stops the server as it starts.
func ExampleMust() {
	build := func(policy string) (string, error) {
		if policy == "" {
			return "", errors.New("mypace: the policy name is empty")
		}
		return "limiting as " + policy, nil
	}
	fmt.Println(adapter.Must(build("per-tenant")))
	defer func() { fmt.Println("panic:", recover()) }()
	adapter.Must(build(""))
	// Output:
	// limiting as per-tenant
	// panic: mypace: the policy name is empty
}
