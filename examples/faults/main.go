// Command faults plays real network faults between real replicas: each
// replica of examples/server runs in a network namespace of its own,
// joined by a veth pair to a bridge in another, with HAProxy and the load
// generator in a third. The faults are made with the kernel's own tools:
// a link set down, nftables rules that drop a peer's packets (both ways,
// one way, or at random), and SIGSTOP. For each it prints the total
// admitted against R·t+B, each replica's admit ratio against the
// cluster's, the requests that failed, how long after the heal every
// replica saw the whole cluster again, and the lowest view of the cluster
// each replica reported during the fault.
//
//	go run ./faults                 # every fault once (as root)
//	go run ./faults -runs 3 split   # one fault, three runs
//
// It creates its namespaces and addresses (10.77.0.0/24, inside them only)
// itself and removes them when it ends. Without root, or without ip(8),
// it says so and exits 0. `make faults` installs HAProxy and nftables from
// the OS packages when they are missing; docs/accuracy.md holds its table.
package main

import (
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

func main() {
	runs := flag.Int("runs", 1, "runs of each fault")
	rate := flag.Int64("rate", 200, "cluster-wide limit R, requests per second (the bucket B is R too)")
	load := flag.Float64("load", 5, "offered load, as a multiple of R")
	inside := flag.String("inside", "", "internal: the namespaces' prefix, when running inside the front namespace")
	bin := flag.String("bin", "", "internal: the examples/server binary")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: faults [flags] [fault ...]\n\nfaults:")
		for _, f := range faults() {
			fmt.Fprintf(flag.CommandLine.Output(), "\n  %-10s %s", f.name, f.what)
		}
		fmt.Fprintln(flag.CommandLine.Output())
		flag.PrintDefaults()
	}
	flag.Parse()
	var chosen []fault
	for _, f := range faults() {
		if flag.NArg() == 0 || slices.Contains(flag.Args(), f.name) {
			chosen = append(chosen, f)
		}
	}
	if len(chosen) == 0 {
		fmt.Fprintf(os.Stderr, "faults: no fault named %v\n", flag.Args())
		os.Exit(2)
	}
	if *inside != "" {
		if err := measureAll(layout(*inside), *bin, chosen, *runs, *rate, *load); err != nil {
			fmt.Fprintln(os.Stderr, "faults:", err)
			os.Exit(1)
		}
		return
	}
	if why := unsupported(); why != "" {
		fmt.Println("faults: skipped:", why)
		return
	}
	if err := outside(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
}

// unsupported says why this machine cannot run the faults, or "".
func unsupported() string {
	if os.Geteuid() != 0 {
		return "creating network namespaces needs root (run as root, or with sudo)"
	}
	for _, tool := range []string{"ip", "haproxy"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not installed (`make faults` installs HAProxy and nftables from the OS packages)"
		}
	}
	return ""
}

// outside builds the server, makes the namespaces, runs this command again
// inside the front namespace, and removes the namespaces, also on SIGINT
// or SIGTERM.
func outside(args []string) error {
	dir, err := os.MkdirTemp("", "gopherpace-faults")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "server")
	fmt.Fprintln(os.Stderr, "building examples/server")
	if out, err := exec.Command("go", "build", "-o", bin, "./server").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./server: %v\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	removeStale()
	ns := layout(fmt.Sprintf("gpf%d", os.Getpid()%100000))
	defer ns.remove()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-stop
		ns.remove()
		os.Exit(1)
	}()
	if err := ns.create(); err != nil {
		return err
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.front, self, "-inside", ns.prefix, "-bin", bin}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// secretKey is a fresh gossip key for a run: the replicas bind addresses
// other than loopback, where gossip must be encrypted.
func secretKey() string {
	var k [16]byte
	rand.Read(k[:])
	return base64.StdEncoding.EncodeToString(k[:])
}

func join(xs []string) string { return strings.Join(xs, ", ") }
