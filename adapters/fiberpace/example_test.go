package fiberpace_test

import (
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/gofiber/fiber/v2"
	"github.com/pedreviljoen/gopherpace/adapters/fiberpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

func ExampleNew() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(1))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	h, err := fiberpace.New(limiter, fiberpace.Config{
		SkipFailedRequests: true, // failed requests give their token back
	})
	if err != nil {
		log.Fatal(err)
	}
	app.Use(h)
	app.Get("/hello", func(c *fiber.Ctx) error { return c.SendString("hello") })

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
