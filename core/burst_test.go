package gopherpace_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// realCluster starts n limiters on a real-time memtransport network (in a
// synctest bubble, its timers run on the bubble's clock) and lets them hear
// each other.
func realCluster(t *testing.T, n int, opts ...gopherpace.Option) []*gopherpace.Limiter {
	t.Helper()
	// 1.5 ms delivery: a slow LAN, within reportFlight.
	net := memtransport.New(memtransport.WithRealTime(), memtransport.WithLatency(1500*time.Microsecond, 0))
	lims, _ := cluster(t, net, n, opts...)
	time.Sleep(time.Second) // every node hears every other
	return lims
}

// One client sending a whole bucket's worth of requests, one after the
// other, to one node of an idle cluster gets them: the node's cap on
// unheard admits makes it wait a few milliseconds for its reports, never
// refuse while the cluster has tokens. Every real-clock form waits the
// same way (waitForReport): Allow, Take, TakeTimed, and a combined
// TakeAll.
func TestSequentialBurstIsNotRefused(t *testing.T) {
	forms := map[string]func(l *gopherpace.Limiter) func() bool{
		"Allow": func(l *gopherpace.Limiter) func() bool {
			return func() bool { ok, _ := l.Allow(); return ok }
		},
		"Take": func(l *gopherpace.Limiter) func() bool {
			return func() bool { d, _ := l.Take("", 1); return d.Allowed }
		},
		"TakeTimed": func(l *gopherpace.Limiter) func() bool {
			return func() bool { d, _, _ := l.TakeTimed("", 1); return d.Allowed }
		},
		"TakeAll": func(l *gopherpace.Limiter) func() bool {
			roomy, err := gopherpace.New(gopherpace.WithRefillRate(1000), gopherpace.WithBucketSize(1000))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { roomy.Close() })
			ls, err := gopherpace.Combine(l, roomy)
			if err != nil {
				t.Fatal(err)
			}
			return func() bool { d, _, _ := ls.TakeAll([]string{"", "k"}, 1, nil); return d.Allowed }
		},
	}
	for _, n := range []int{3, 5} {
		for name, form := range forms {
			t.Run(fmt.Sprint(n, " nodes, ", name), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					const bucketSize = 100
					lims := realCluster(t, n, gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(bucketSize))
					try := form(lims[0])
					admitted := 0
					for range bucketSize {
						if try() {
							admitted++
						}
					}
					if admitted < bucketSize*98/100 {
						t.Fatalf("a sequential burst of %d admitted %d; want at least 98%%", bucketSize, admitted)
					}
				})
			})
		}
	}
}

// The same over HTTP, on the real clock: Wrap answers no 429 to a client's
// sequential burst into one node of an idle cluster.
func TestSequentialBurstOverHTTP(t *testing.T) {
	const bucketSize = 30
	net := memtransport.New(memtransport.WithRealTime())
	lims, _ := cluster(t, net, 3, gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(bucketSize))
	for deadline := time.Now().Add(10 * time.Second); lims[0].Stats().HeardNodes < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the nodes never heard each other")
		}
	}
	srv := httptest.NewServer(lims[0].Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()
	ok := 0
	for range bucketSize {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ok++
		}
	}
	if ok < bucketSize*98/100 {
		t.Fatalf("%d of %d sequential requests answered 200", ok, bucketSize)
	}
}

// A flash crowd, every node hit by a stream of callers from the same
// instant, still admits no more than the bucket and a tenth: each node
// admits its share, then holds (new callers included) until the others'
// reports have arrived and its replica knows the bucket is spent.
func TestFlashCrowdWithWaitingCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const nodes, bucketSize, callers = 5, 1000, 50
		lims := realCluster(t, nodes, gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(bucketSize))
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for _, l := range lims {
			for range callers {
				wg.Go(func() {
					for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
						if ok, _ := l.Allow(); ok {
							admitted.Add(1)
						}
						time.Sleep(100 * time.Microsecond)
					}
				})
			}
		}
		wg.Wait()
		t.Logf("admitted %d", admitted.Load())
		if got := admitted.Load(); got > bucketSize+bucketSize/10 {
			t.Fatalf("a flash crowd admitted %d from a bucket of %d; bound B + B/10", got, bucketSize)
		}
	})
}
