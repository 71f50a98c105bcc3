package echopace_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/labstack/echo/v4"
	"github.com/pedreviljoen/gopherpace/adapters/echopace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

func ExampleRateLimiter() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(1))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	e := echo.New()
	e.HideBanner = true
	e.Use(echopace.RateLimiter(limiter))
	e.GET("/hello", func(c echo.Context) error { return c.String(http.StatusOK, "hello") })

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
