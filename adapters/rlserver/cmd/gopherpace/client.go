package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/pedreviljoen/gopherpace/adapters/serviceclient"
)

// client plays one replica of a service that asks the limiter before
// each unit of work, at a steady -rps for -duration (or until interrupted),
// and prints what it was allowed, denied, and what the calls cost: the
// experiment of three replicas sharing one key, and of a limiter stopped
// mid-run in each -fail mode.
func client(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gopherpace client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host, _ := os.Hostname()
	id := fs.String("id", fmt.Sprintf("%s-%d", host, os.Getpid()), "this replica's name in the summary")
	limiter := fs.String("limiter", "http://localhost:8100", "the service's URL")
	key := fs.String("key", "tenant-a", "the key every unit of work asks for")
	rps := fs.Float64("rps", 20, "units of work a second this replica wants")
	duration := fs.Duration("duration", 8*time.Second, "how long to run; 0 runs until interrupted")
	timeout := fs.Duration("timeout", serviceclient.DefaultTimeout, "how long a call to the limiter may take before it counts as an error")
	fail := fs.String("fail", "", "what an error answers: open (the work goes on) or closed (it stops); required")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var mode serviceclient.FailMode
	switch *fail {
	case "open":
		mode = serviceclient.FailOpen
	case "closed":
		mode = serviceclient.FailClosed
	default:
		fmt.Fprintln(stderr, "gopherpace client: -fail open or -fail closed: say what the work does when the limiter does not answer")
		return 2
	}
	if *rps <= 0 || *rps > 100_000 {
		fmt.Fprintln(stderr, "gopherpace client: -rps must be above 0 and at most 100000")
		return 2
	}
	c, err := serviceclient.New(*limiter, serviceclient.WithTimeout(*timeout), serviceclient.WithDeniedCache(0))
	if err != nil {
		fmt.Fprintln(stderr, "gopherpace client:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	var s summary
	tick := time.NewTicker(time.Duration(float64(time.Second) / *rps))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			s.print(stdout, *id)
			return 0
		case <-tick.C:
		}
		start := time.Now()
		r := c.Allow(ctx, *key, 1, mode)
		if ctx.Err() != nil && r.Err != nil {
			continue // the run ended during the call
		}
		s.latencies = append(s.latencies, time.Since(start))
		s.attempts++
		switch {
		case r.Err != nil:
			s.errors++
		case r.Allowed:
			s.allowed++
		default:
			s.denied++
		}
		if r.Allowed {
			s.work++
		}
	}
}

// summary is what one replica was told.
type summary struct {
	attempts, allowed, denied, errors, work int
	latencies                               []time.Duration
}

func (s *summary) print(w io.Writer, id string) {
	fmt.Fprintf(w, "%s summary: attempts=%d allowed=%d denied=%d errors=%d → work done=%d\n",
		id, s.attempts, s.allowed, s.denied, s.errors, s.work)
	if len(s.latencies) == 0 {
		return
	}
	slices.Sort(s.latencies)
	p := func(q float64) time.Duration { return s.latencies[int(q*float64(len(s.latencies)-1))] }
	fmt.Fprintf(w, "%s /allow latency: p50=%v p99=%v\n", id, p(0.5).Round(10*time.Microsecond), p(0.99).Round(10*time.Microsecond))
}
