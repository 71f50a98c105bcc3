package echo5pace_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/labstack/echo/v5"
	"github.com/pedreviljoen/gopherpace/adapters/echo5pace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// Limit each client to 10 requests a second, one at a time, inline, as
// Echo's own RateLimiter is used.
func ExampleRateLimiter() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(1))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	e := echo.New()
	e.Use(echo5pace.RateLimiter(limiter))
	e.GET("/hello", func(c *echo.Context) error { return c.String(http.StatusOK, "hello") })

	srv := httptest.NewServer(e)
	defer srv.Close()
	for range 2 {
		resp, err := http.Get(srv.URL + "/hello")
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

// Behind load balancers in 10.0.0.0/8, key by the address they forward.
// Build returns configuration errors instead of panicking.
func ExampleBuild() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(20))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	mw, err := echo5pace.Build(limiter, echo5pace.WithTrustedProxies(netip.MustParsePrefix("10.0.0.0/8")))
	if err != nil {
		log.Fatal(err)
	}
	e := echo.New()
	e.Use(mw)

	_, err = echo5pace.Build(nil)
	fmt.Println(err)
	// Output:
	// echo5pace: nil Limiter
}
