package ginpace_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/gin-gonic/gin"
	"github.com/pedreviljoen/gopherpace/adapters/ginpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// Limit each client to 10 requests a second, one at a time, inline. The
// client is the connection's address, whatever Gin's own trusted proxies
// are.
func ExampleNew() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(1))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(ginpace.New(limiter))
	r.GET("/hello", func(c *gin.Context) { c.String(http.StatusOK, "hello") })

	srv := httptest.NewServer(r)
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

	mw, err := ginpace.Build(limiter, ginpace.WithTrustedProxies(netip.MustParsePrefix("10.0.0.0/8")))
	if err != nil {
		log.Fatal(err)
	}
	r := gin.New()
	r.Use(mw)

	_, err = ginpace.Build(limiter, ginpace.WithIPv6Prefix(0))
	fmt.Println(err)
	// Output:
	// ginpace: IPv6 prefix must be between 1 and 128 bits
}
