package ginpace_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/gin-gonic/gin"
	"github.com/pedreviljoen/gopherpace/adapters/ginpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

func ExampleNew() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(1))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.SetTrustedProxies(nil) // clients connect directly: never trust X-Forwarded-For
	mw, err := ginpace.New(limiter)
	if err != nil {
		log.Fatal(err)
	}
	r.Use(mw)
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
