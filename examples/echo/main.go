// Command echo serves an Echo app limited per client IP by echopace, then
// (unless -serve) sends it a burst of requests and prints the answers.
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

	"github.com/labstack/echo/v4"
	"github.com/pedreviljoen/gopherpace/adapters/echopace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/examples/internal/burst"
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
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// Each client is the connection's address. Behind a load balancer add
	// echopace.WithTrustedProxies(its networks...).
	e.Use(echopace.RateLimiter(limiter, echopace.WithPolicyName("per-ip")))
	e.GET("/hello", func(c echo.Context) error { return c.String(http.StatusOK, "hello\n") })
	// A stricter limit on one route: its own limiter, as route middleware.
	login, err := gopherpace.New(gopherpace.WithRate(5, time.Minute))
	if err != nil {
		return err
	}
	defer login.Close()
	e.POST("/login", func(c echo.Context) error { return c.String(http.StatusOK, "welcome\n") },
		echopace.RateLimiter(login, echopace.WithPolicyName("login")))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: e}
	defer srv.Close()
	go srv.Serve(ln)
	if serve {
		fmt.Fprintln(out, "serving on", ln.Addr())
		signals.Wait() // then the deferred Closes run
		return nil
	}
	return burst.Run(out, "http://"+ln.Addr().String()+"/hello", 5)
}
