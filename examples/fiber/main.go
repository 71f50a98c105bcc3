// Command fiber serves a Fiber app limited per client IP by fiberpace, with
// failed requests refunded, then (unless -serve) sends it a burst of
// requests and prints the answers.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/pedreviljoen/gopherpace/adapters/fiberpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/examples/internal/signals"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	serve := flag.Bool("serve", false, "keep serving instead of running the self-test")
	flag.Parse()
	if err := run(*addr, *serve, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(addr string, serve bool, out io.Writer) error {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(5), gopherpace.WithBucketSize(3))
	if err != nil {
		return err
	}
	defer limiter.Close()
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	// Each client is the connection's address. Behind a load balancer add
	// fiberpace.WithTrustedProxies(its networks...). Failed requests give
	// their token back.
	app.Use(fiberpace.New(limiter, fiberpace.WithRefund(fiberpace.RefundFailed), fiberpace.WithPolicyName("per-ip")))
	app.Get("/hello", func(c *fiber.Ctx) error { return c.SendString("hello\n") })
	// A stricter limit on one route: its own limiter, as route middleware.
	login, err := gopherpace.New(gopherpace.WithRate(5, time.Minute))
	if err != nil {
		return err
	}
	defer login.Close()
	app.Post("/login", fiberpace.New(login, fiberpace.WithPolicyName("login")), func(c *fiber.Ctx) error { return c.SendString("welcome\n") })
	app.Get("/broken", func(c *fiber.Ctx) error { return fiber.ErrBadGateway })
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go app.Listener(ln)
	defer app.Shutdown()
	if serve {
		fmt.Fprintln(out, "serving on", ln.Addr())
		signals.Wait() // then the deferred Closes run
		return nil
	}
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i, path := range []string{"/broken", "/broken", "/hello", "/hello", "/hello", "/hello"} {
		resp, err := client.Get(base + path)
		if err != nil {
			return err
		}
		resp.Body.Close()
		fmt.Fprintf(out, "request %d %-8s %d  RateLimit: %s\n", i+1, path, resp.StatusCode, resp.Header.Get("RateLimit"))
	}
	return nil
}
