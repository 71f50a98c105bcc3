// Command standalone runs one rate-limited net/http server on loopback,
// drives it at several times its limit for a few seconds, and prints each
// second how many requests were admitted and denied against the limit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/httplimit"
)

func main() {
	rate := flag.Int64("rate", 100, "refill rate, requests per second")
	burst := flag.Int64("burst", 100, "bucket size")
	offered := flag.Int("offered", 500, "offered load, requests per second")
	seconds := flag.Int("seconds", 5, "how long to drive load")
	flag.Parse()
	if err := run(*rate, *burst, *offered, *seconds); err != nil {
		log.Fatal(err)
	}
}

func run(rate, burst int64, offered, seconds int) error {
	if offered < 1 || offered > 5000 || seconds < 1 || seconds > 60 {
		return errors.New("offered load must be 1..5000/s and duration 1..60s")
	}
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(burst))
	if err != nil {
		return err
	}
	defer limiter.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// One bucket for the whole server: every client here is 127.0.0.1
	// anyway. The default key is the client's address.
	limited := httplimit.New(limiter, httplimit.WithKeyFunc(httplimit.GlobalKey))
	srv := &http.Server{Handler: limited(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	}))}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	url := "http://" + ln.Addr().String() + "/"
	fmt.Printf("standalone server on %s: limit %d/s, bucket %d; offering %d req/s for %ds\n\n",
		ln.Addr(), rate, burst, offered, seconds)

	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var admitted, denied, failed atomic.Int64
	var wg sync.WaitGroup
	jobs := make(chan struct{}, 64)
	for range 16 {
		wg.Go(func() {
			for range jobs {
				resp, err := client.Get(url)
				if err != nil {
					failed.Add(1)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests {
					denied.Add(1)
				} else {
					admitted.Add(1)
				}
			}
		})
	}

	fmt.Printf("%4s %9s %7s %7s\n", "sec", "admitted", "denied", "limit")
	var totalAdmitted, totalDenied int64
	pace := time.NewTicker(time.Second / time.Duration(offered))
	start := time.Now()
	for s := 1; s <= seconds; s++ {
		end := start.Add(time.Duration(s) * time.Second)
		for time.Now().Before(end) {
			<-pace.C
			select {
			case jobs <- struct{}{}:
			default: // the server is slower than the offered load: skip
			}
		}
		a, d := admitted.Swap(0), denied.Swap(0)
		totalAdmitted += a
		totalDenied += d
		limit := rate
		if s == 1 {
			limit += burst
		}
		fmt.Printf("%4d %9d %7d %7d\n", s, a, d, limit)
	}
	pace.Stop()
	close(jobs)
	wg.Wait()
	totalAdmitted += admitted.Load()
	totalDenied += denied.Load()
	ideal := rate*int64(seconds) + burst
	fmt.Printf("\ntotal: admitted %d, denied %d, failed %d; ideal bucket admits at most %d (rate×t + burst)\n",
		totalAdmitted, totalDenied, failed.Load(), ideal)
	if totalAdmitted > ideal {
		return fmt.Errorf("admitted %d, over the %d an ideal bucket allows", totalAdmitted, ideal)
	}
	return nil
}
