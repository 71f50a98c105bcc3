// Package scenario drives a cluster of rate limiters with Poisson arrivals
// in real time and counts what it admits.
package scenario

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// A scenario offers load to N nodes for a while: each node gets Poisson
// arrivals at its share of the offered rate.
type Scenario struct {
	Name    string
	Shares  []float64 // of the offered rate, per node; sums to 1
	Offered float64   // requests a second, all nodes together
	Seconds int
}

// A System is one cluster under test: Allow asks node i about one
// request.
type System struct {
	Name  string
	Allow func(node int) bool
	Close func()
}

// An Outcome is what a system admitted in a scenario.
type Outcome struct {
	Admitted  []int64 // per node
	PerSecond []int64 // all nodes, per wall-clock second of the run
	Offered   int64   // arrivals, all nodes
}

// Total is what every node admitted together.
func (o Outcome) Total() (n int64) {
	for _, a := range o.Admitted {
		n += a
	}
	return n
}

// Run drives the scenario against sys in real time. Every arrival is its
// own goroutine, so a slow answer never delays the next arrival; the
// arrivals are bounded by the scenario's rate and length.
func Run(sc Scenario, sys System, seed uint64) Outcome {
	out := Outcome{Admitted: make([]int64, len(sc.Shares)), PerSecond: make([]int64, sc.Seconds)}
	counts := make([]atomic.Int64, len(sc.Shares))
	seconds := make([]atomic.Int64, sc.Seconds)
	var offered atomic.Int64
	start := time.Now()
	end := start.Add(time.Duration(sc.Seconds) * time.Second)
	var wg sync.WaitGroup
	for node, share := range sc.Shares {
		if share == 0 {
			continue
		}
		rng := rand.New(rand.NewPCG(seed, uint64(node)))
		mean := float64(time.Second) / (sc.Offered * share)
		wg.Go(func() {
			at := start
			for {
				at = at.Add(time.Duration(rng.ExpFloat64() * mean))
				if !at.Before(end) {
					return
				}
				time.Sleep(time.Until(at))
				offered.Add(1)
				wg.Go(func() {
					if sys.Allow(node) {
						counts[node].Add(1)
						if s := int(time.Since(start) / time.Second); s < len(seconds) {
							seconds[s].Add(1)
						}
					}
				})
			}
		})
	}
	wg.Wait()
	for i := range counts {
		out.Admitted[i] = counts[i].Load()
	}
	for i := range seconds {
		out.PerSecond[i] = seconds[i].Load()
	}
	out.Offered = offered.Load()
	return out
}
