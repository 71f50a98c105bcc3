package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Counts is what the load generator saw, per replica (by HAProxy's
// server name) and per second of the run.
type Counts struct {
	mu                sync.Mutex
	start             time.Time
	offered, admitted map[string][]int64
	failed            atomic.Int64
}

func (c *Counts) add(who string, admitted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := int(time.Since(c.start) / time.Second)
	for _, m := range []map[string][]int64{c.offered, c.admitted} {
		for len(m[who]) <= s {
			m[who] = append(m[who], 0)
		}
	}
	c.offered[who][s]++
	if admitted {
		c.admitted[who][s]++
	}
}

// Result is one run's outcome.
type Result struct {
	Total    float64            // admitted / (R·t+B)
	Admitted int64              // requests answered 200
	Ratios   map[string]float64 // replica's admit ratio / the cluster's
	Failed   int64              // answers other than 200 and 429, and errors
}

// Spread is the lowest and highest replica ratio, "lo–hi".
func (r Result) Spread() string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range r.Ratios {
		lo, hi = min(lo, v), max(hi, v)
	}
	if len(r.Ratios) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f–%.2f", lo, hi)
}

// Result compares each replica with the cluster second by second: its
// admits against what the cluster's admit ratio in each second would have
// given its offered load, so that a replica that lived for part of the run
// is compared with the same seconds. ideal is R·t+B.
func (c *Counts) Result(ideal float64) Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	var clusterO, clusterA []int64
	var o, a int64
	for who := range c.offered {
		for s, n := range c.offered[who] {
			for len(clusterO) <= s {
				clusterO, clusterA = append(clusterO, 0), append(clusterA, 0)
			}
			clusterO[s] += n
			clusterA[s] += c.admitted[who][s]
			o, a = o+n, a+c.admitted[who][s]
		}
	}
	res := Result{Total: float64(a) / ideal, Admitted: a, Ratios: map[string]float64{}, Failed: c.failed.Load()}
	for who, offered := range c.offered {
		var got int64
		var want, mine float64
		for s, n := range offered {
			got += c.admitted[who][s]
			mine += float64(n)
			if clusterO[s] > 0 {
				want += float64(n) * float64(clusterA[s]) / float64(clusterO[s])
			}
		}
		if mine*100 < float64(o) || want == 0 {
			continue // replicas that took under 1% of the load say nothing
		}
		res.Ratios[who] = float64(got) / want
	}
	return res
}

// Generate sends Poisson arrivals at perSecond to url until ctx ends, each
// request on its own goroutine, at most 512 in flight (beyond that an
// arrival counts as failed: the cluster did not keep up).
func Generate(ctx context.Context, url string, perSecond float64) *Counts {
	c := &Counts{start: time.Now(), offered: map[string][]int64{}, admitted: map[string][]int64{}}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	sem := make(chan struct{}, 512)
	var wg sync.WaitGroup
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	next := time.Now()
	for ctx.Err() == nil {
		next = next.Add(time.Duration(rng.ExpFloat64() / perSecond * float64(time.Second)))
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		select {
		case sem <- struct{}{}:
		default:
			c.failed.Add(1)
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			resp, err := client.Get(url)
			if err != nil {
				c.failed.Add(1)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK, http.StatusTooManyRequests:
				c.add(resp.Header.Get("X-Replica"), resp.StatusCode == http.StatusOK)
			default:
				c.failed.Add(1)
			}
		}()
	}
	wg.Wait()
	client.CloseIdleConnections()
	return c
}

// Stats is what a replica's /stats says of its limiter's view of the
// cluster.
type Stats struct {
	VisibleNodes, KnownNodes int64
	Partitioned              bool
	Answered                 bool // /stats answered
}

// StatsOf reads a replica's /stats; Answered is false when it did not
// answer within a second.
func StatsOf(httpAddr string) Stats {
	client := http.Client{Timeout: time.Second}
	resp, err := client.Get("http://" + httpAddr + "/stats")
	if err != nil {
		return Stats{}
	}
	defer resp.Body.Close()
	var s struct{ Limiter Stats }
	if json.NewDecoder(resp.Body).Decode(&s) != nil {
		return Stats{}
	}
	s.Limiter.Answered = true
	return s.Limiter
}

// Get is the status url answers with, 0 if none.
func Get(url string) int {
	client := http.Client{Timeout: time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
