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

	"github.com/gin-gonic/gin"
	"github.com/pedreviljoen/gopherpace/adapters/ginpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/examples/internal/burst"
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
	// Clients connect directly here; behind a load balancer list its
	// addresses instead, or every client could choose its own bucket.
	if err := r.SetTrustedProxies(nil); err != nil {
		return err
	}
	mw, err := ginpace.New(limiter, ginpace.WithPolicyName("per-ip"))
	if err != nil {
		return err
	}
	r.Use(mw)
	r.GET("/hello", func(c *gin.Context) { c.String(http.StatusOK, "hello\n") })
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: r}
	defer srv.Close()
	go srv.Serve(ln)
	if serve {
		fmt.Fprintln(out, "serving on", ln.Addr())
		select {}
	}
	return burst.Run(out, "http://"+ln.Addr().String()+"/hello", 5)
}
