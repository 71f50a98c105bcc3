// Command gin serves a Gin app limited per client IP by ginpace, then
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

	"github.com/gin-gonic/gin"
	"github.com/pedreviljoen/gopherpace/adapters/ginpace"
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
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	// Each client is the connection's address. Behind a load balancer add
	// ginpace.WithTrustedProxies(its networks...).
	r.Use(ginpace.New(limiter, ginpace.WithPolicyName("per-ip")))
	r.GET("/hello", func(c *gin.Context) { c.String(http.StatusOK, "hello\n") })
	// A stricter limit on one route: its own limiter, as route middleware.
	login, err := gopherpace.New(gopherpace.WithRate(5, time.Minute))
	if err != nil {
		return err
	}
	defer login.Close()
	r.POST("/login", ginpace.New(login, ginpace.WithPolicyName("login")), func(c *gin.Context) { c.String(http.StatusOK, "welcome\n") })
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: r}
	defer srv.Close()
	go srv.Serve(ln)
	if serve {
		fmt.Fprintln(out, "serving on", ln.Addr())
		signals.Wait() // then the deferred Closes run
		return nil
	}
	return burst.Run(out, "http://"+ln.Addr().String()+"/hello", 5)
}
