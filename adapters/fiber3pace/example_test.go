package fiber3pace_test

import (
	"fmt"
	"log"
	"net/http/httptest"
	"net/netip"

	"github.com/gofiber/fiber/v3"
	"github.com/pedreviljoen/gopherpace/adapters/fiber3pace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// Limit each client to 10 requests a second, one at a time, inline, as
// Fiber's own limiter is used; failed requests give their token back.
func ExampleNew() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(1))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	app := fiber.New()
	app.Use(fiber3pace.New(limiter, fiber3pace.WithRefund(fiber3pace.RefundFailed)))
	app.Get("/hello", func(c fiber.Ctx) error { return c.SendString("hello") })

	for range 2 {
		resp, err := app.Test(httptest.NewRequest("GET", "/hello", nil))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d Retry-After=%q\n", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Output:
	// 200 Retry-After=""
	// 429 Retry-After="1"
}

// Behind load balancers in 10.0.0.0/8, key by the address they forward:
// no Fiber ProxyHeader setting is needed. Build returns configuration
// errors instead of panicking.
func ExampleBuild() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(20))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	h, err := fiber3pace.Build(limiter, fiber3pace.WithTrustedProxies(netip.MustParsePrefix("10.0.0.0/8")))
	if err != nil {
		log.Fatal(err)
	}
	app := fiber.New()
	app.Use(h)

	_, err = fiber3pace.Build(limiter, fiber3pace.WithPolicyName(""))
	fmt.Println(err)
	// Output:
	// fiber3pace: policy name must be 1-64 printable ASCII characters
}
