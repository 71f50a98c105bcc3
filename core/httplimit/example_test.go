package httplimit_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/httplimit"
)

// Limit each client to 5 requests per second in bursts of 10, inline. The
// client is the connection's address: no forwarding field is believed.
func ExampleNew() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(5), gopherpace.WithBucketSize(10))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	srv := httptest.NewServer(httplimit.New(limiter, httplimit.WithPolicyName("per-client"))(mux))
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
	// "per-client";q=10;w=2
	// "per-client";r=9;t=1
}

// Behind load balancers in 10.0.0.0/8, key by the address they forward;
// never limit the health check; give back the tokens of server errors.
// Build returns configuration errors instead of panicking.
func ExampleBuild() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(5), gopherpace.WithBucketSize(10))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	mw, err := httplimit.Build(limiter,
		httplimit.WithTrustedProxies(netip.MustParsePrefix("10.0.0.0/8")),
		httplimit.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }),
		httplimit.WithRefund(httplimit.RefundServerErrors),
	)
	if err != nil {
		log.Fatal(err)
	}
	handler := mw.Wrap(http.NotFoundHandler())
	_ = handler

	_, err = httplimit.Build(limiter, httplimit.WithPolicyName("two\nlines"))
	fmt.Println(err)
	// Output:
	// httplimit: policy name must be 1-64 printable ASCII characters
}

// A key per API key, read from a header; a request without one is
// answered 400 Bad Request and spends nothing.
func ExampleHeaderKey() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(100), gopherpace.WithBucketSize(100))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	h := httplimit.New(limiter, httplimit.WithKeyFunc(httplimit.HeaderKey("X-API-Key")))(http.NotFoundHandler())

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	fmt.Println(w.Code)
	// Output:
	// 400
}

// 10 a second per client and 100 an hour per API key, together: a request
// either limit denies spends from neither, and the fields list both.
func ExampleWithAlso() {
	perIP, _ := gopherpace.New(gopherpace.WithRate(10, time.Second))
	perKey, _ := gopherpace.New(gopherpace.WithRate(100, time.Hour))
	defer perIP.Close()
	defer perKey.Close()
	mux := http.NewServeMux()
	handler := httplimit.New(perIP,
		httplimit.WithAlso(perKey, httplimit.HeaderKey("X-API-Key"), "per-key"),
	)(mux)

	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-API-Key", "k1")
	w := httptest.NewRecorder()
	handler.ServeHTTP(w, r)
	fmt.Println(w.Header().Get("RateLimit-Policy"))
	// Output: "default";q=10;w=1, "per-key";q=100;w=3600
}

// Shaping: a client over the rate waits for its tokens instead of getting
// 429, as long as they are due within 300 ms.
func ExampleWithMaxDelay() {
	limiter, _ := gopherpace.New(gopherpace.WithRefillRate(20), gopherpace.WithBucketSize(1))
	defer limiter.Close()
	handler := httplimit.New(limiter, httplimit.WithMaxDelay(300*time.Millisecond), httplimit.WithMaxQueue(100))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 4 { // the bucket holds one; the others wait 50 ms each
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		fmt.Print(w.Code, " ")
	}
	// Output: 200 200 200 200
}

// At most one request in the handler at once: a second, while the first
// runs, is denied.
func ExampleWithConcurrency() {
	limiter, _ := gopherpace.New(gopherpace.WithRate(100, time.Second))
	defer limiter.Close()
	backend, _ := gopherpace.NewInFlight(1)
	var handler http.Handler
	handler = httplimit.New(limiter, httplimit.WithConcurrency(backend))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/nested" {
			return
		}
		// While this request holds the one slot, another is refused.
		inner := httptest.NewRecorder()
		handler.ServeHTTP(inner, httptest.NewRequest("GET", "/nested", nil))
		fmt.Println("while one runs:", inner.Code)
	}))
	handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	after := httptest.NewRecorder()
	handler.ServeHTTP(after, httptest.NewRequest("GET", "/nested", nil))
	fmt.Println("after it ended:", after.Code)
	// Output:
	// while one runs: 429
	// after it ended: 200
}
