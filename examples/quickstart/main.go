package main

import (
	"context"
	"log"
	"net/http"
	"os/signal"
	"syscall"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

func main() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(100)) // 100 req/s, bursts of 100
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("done\n")) })
	srv := &http.Server{Addr: ":8080", Handler: limiter.Wrap(mux)}

	go func() {
		if err := srv.ListenAndServe(); err != http.ErrServerClosed {
			log.Fatal(err)
		}
	}()
	// Stop on SIGTERM, finishing the requests in flight, so that the
	// deferred Close runs: clustered, it tells the peers this node is
	// leaving, and a rolling deploy does not look like a crash.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	srv.Shutdown(context.Background())
}
