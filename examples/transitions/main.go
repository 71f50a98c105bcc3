// Command transitions measures the transitions that happen every day in a
// deployment from outside, as production sees them: real HAProxy
// (round-robin, health checks on /readyz every 200 ms) in front of
// replicas of examples/server, real processes gossiping over memberlist on
// loopback, and a load generator sending Poisson arrivals at five times the
// cluster-wide limit. It prints one table row per run: the total admitted
// against R·t+B, the worst replica's admit ratio against the cluster's, and
// the requests that failed (anything but 200 or 429).
//
//	go run ./transitions                  # every scenario once
//	go run ./transitions -runs 5 rolling  # one scenario, five runs
//
// `make transitions` installs HAProxy from the OS packages when it is
// missing and runs this; docs/accuracy.md holds its table.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/pedreviljoen/gopherpace/examples/internal/fleet"
)

type scenario struct {
	name     string
	start    int           // replicas at the start
	duration time.Duration // of the measured load
	// events change the cluster at offsets into the load.
	events []event
	what   string
}

type event struct {
	at time.Duration
	do func(f *fleet.Fleet) error
}

func scenarios() []scenario {
	rolling := func(sameName bool) []event {
		var evs []event
		for i := range 5 {
			evs = append(evs, event{time.Duration(2+4*i) * time.Second, func(f *fleet.Fleet) error {
				return f.Replace(i, sameName)
			}})
		}
		return evs
	}
	return []scenario{
		{name: "steady", start: 3, duration: 20 * time.Second, what: "3 replicas, steady"},
		{name: "rolling", start: 5, duration: 24 * time.Second, events: rolling(false),
			what: "5 → 5, rolling deploy (each replica SIGTERMed and replaced under a new name, one every 4 s)"},
		{name: "restart", start: 5, duration: 24 * time.Second, events: rolling(true),
			what: "5 → 5, rolling restart under the same names (StatefulSet)"},
		{name: "scale-out", start: 3, duration: 20 * time.Second, events: []event{{10 * time.Second, func(f *fleet.Fleet) error {
			return errors.Join(f.Add(), f.Add())
		}}}, what: "3 → 5, scale-out half way"},
		{name: "scale-in", start: 5, duration: 20 * time.Second, events: []event{{10 * time.Second, func(f *fleet.Fleet) error {
			return errors.Join(f.Signal(3, syscall.SIGTERM), f.Signal(4, syscall.SIGTERM))
		}}}, what: "5 → 3, scale-in half way (two replicas SIGTERMed at once)"},
		{name: "crash", start: 3, duration: 21 * time.Second, events: []event{{7 * time.Second, func(f *fleet.Fleet) error {
			return f.Signal(2, syscall.SIGKILL)
		}}}, what: "3 replicas, one SIGKILLed at 7 s, not replaced"},
		{name: "crash-replace", start: 3, duration: 21 * time.Second, events: []event{{7 * time.Second, func(f *fleet.Fleet) error {
			return errors.Join(f.Signal(2, syscall.SIGKILL), f.Add())
		}}}, what: "3 replicas, one SIGKILLed at 7 s and replaced at once"},
	}
}

func main() {
	runs := flag.Int("runs", 1, "runs of each scenario")
	rate := flag.Int64("rate", 200, "cluster-wide limit R, requests per second (the bucket B is R too)")
	load := flag.Float64("load", 5, "offered load, as a multiple of R")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: transitions [flags] [scenario ...]\n\nscenarios:")
		for _, sc := range scenarios() {
			fmt.Fprintf(flag.CommandLine.Output(), "\n  %-14s %s", sc.name, sc.what)
		}
		fmt.Fprintln(flag.CommandLine.Output())
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*runs, *rate, *load, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "transitions:", err)
		os.Exit(1)
	}
}

func run(runs int, rate int64, load float64, names []string) error {
	if _, err := exec.LookPath("haproxy"); err != nil {
		return errors.New("haproxy is not installed: `make transitions` installs it from the OS packages")
	}
	dir, err := os.MkdirTemp("", "gopherpace-transitions")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "server")
	fmt.Fprintln(os.Stderr, "building examples/server")
	if out, err := exec.Command("go", "build", "-o", bin, "./server").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./server: %v\n%s", err, out)
	}
	var chosen []scenario
	for _, sc := range scenarios() {
		if len(names) == 0 || slices.Contains(names, sc.name) {
			chosen = append(chosen, sc)
		}
	}
	if len(chosen) == 0 {
		return fmt.Errorf("no scenario named %v", names)
	}
	fmt.Printf("R = B = %d/s, offered %.0f×R as Poisson arrivals through HAProxy (round-robin, checks on /readyz every 200 ms)\n\n", rate, load)
	fmt.Println("| scenario | run | total vs R·t+B | worst replica's admit ratio vs the cluster's | failed requests |")
	fmt.Println("|---|---|---|---|---|")
	failed := false
	for _, sc := range chosen {
		for r := 1; r <= runs; r++ {
			res, err := measure(dir, bin, sc, rate, load)
			if err != nil {
				fmt.Printf("| %s | %d | error: %v | | |\n", sc.what, r, err)
				failed = true
				continue
			}
			fmt.Printf("| %s | %d | %.4f | %s | %d |\n", sc.what, r, res.Total, res.Spread(), res.Failed)
		}
	}
	if failed {
		return errors.New("some runs failed")
	}
	return nil
}

func measure(dir, bin string, sc scenario, rate int64, load float64) (fleet.Result, error) {
	front, err := freePort()
	if err != nil {
		return fleet.Result{}, err
	}
	f, err := fleet.Start(dir, "127.0.0.1:"+strconv.Itoa(front), func(name string, slot int) *exec.Cmd {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(),
			"GOPHERPACE_RATE="+strconv.FormatInt(rate, 10), "GOPHERPACE_BURST="+strconv.FormatInt(rate, 10),
			"GOPHERPACE_GOSSIP_PORT=0", "GOPHERPACE_BIND_ADDR=127.0.0.1",
			"GOPHERPACE_HTTP_ADDR=127.0.0.1:0",
			// Out of HAProxy's rotation (two failed checks 200 ms apart)
			// before the server stops accepting.
			"GOPHERPACE_DRAIN=1s")
		return cmd
	})
	if err != nil {
		return fleet.Result{}, err
	}
	defer f.Close()
	for range sc.start {
		if err := f.Add(); err != nil {
			return fleet.Result{}, err
		}
	}
	if err := f.WaitFormed(sc.start, 20*time.Second); err != nil {
		return fleet.Result{}, err
	}
	// HAProxy's checks find every replica up within a few intervals.
	url := "http://127.0.0.1:" + strconv.Itoa(front)
	if err := fleet.WaitFor(10*time.Second, func() bool { return fleet.Get(url+"/readyz") == http.StatusOK }); err != nil {
		return fleet.Result{}, errors.New("HAProxy never saw a replica up")
	}
	time.Sleep(time.Second) // every check has passed at least once

	ctx, cancel := context.WithTimeout(context.Background(), sc.duration)
	defer cancel()
	errc := make(chan error, len(sc.events))
	start := time.Now()
	for _, ev := range sc.events {
		t := time.AfterFunc(ev.at, func() { errc <- ev.do(f) })
		defer t.Stop()
	}
	counts := fleet.Generate(ctx, url+"/work", float64(rate)*load)
	elapsed := time.Since(start)
	select {
	case err := <-errc:
		if err != nil {
			return fleet.Result{}, err
		}
	default:
	}
	return counts.Result(float64(rate)*elapsed.Seconds() + float64(rate)), nil
}

// freePort asks the OS for a free loopback port (HAProxy's configuration
// needs its own before it starts).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
