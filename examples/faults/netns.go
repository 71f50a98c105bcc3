package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// replicas is how many replicas every fault runs with: enough for a 3/2
// split.
const replicas = 5

// The addresses, inside the namespaces only: the front (HAProxy and the
// load generator) at .2, replica i at .10+i.
const (
	subnet     = "10.77.0."
	frontIP    = subnet + "2"
	frontPort  = "8000"
	gossipPort = "7946"
	httpPort   = "8080"
)

func replicaIP(i int) string { return subnet + strconv.Itoa(10+i) }

// namespaces names the network namespaces of one run of this command: the
// bridge's, the front's, and one per replica.
type namespaces struct {
	prefix, fabric, front string
	replica               []string
}

func layout(prefix string) namespaces {
	ns := namespaces{prefix: prefix, fabric: prefix + "-fab", front: prefix + "-front"}
	for i := range replicas {
		ns.replica = append(ns.replica, prefix+"-r"+strconv.Itoa(i))
	}
	return ns
}

// ip runs ip(8) with args.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// create makes the namespaces, the bridge in the fabric one, and a veth
// pair from each endpoint to the bridge: eth0 in the endpoint's namespace,
// p<n> on the bridge (pf for the front).
func (ns namespaces) create() error {
	for _, n := range append([]string{ns.fabric, ns.front}, ns.replica...) {
		if err := ip("netns", "add", n); err != nil {
			return err
		}
		if err := ip("-n", n, "link", "set", "lo", "up"); err != nil {
			return err
		}
	}
	if err := ip("-n", ns.fabric, "link", "add", "br0", "type", "bridge"); err != nil {
		return err
	}
	if err := ip("-n", ns.fabric, "link", "set", "br0", "up"); err != nil {
		return err
	}
	plug := func(n, port, addr string) error {
		for _, args := range [][]string{
			{"link", "add", "eth0", "netns", n, "type", "veth", "peer", "name", port, "netns", ns.fabric},
			{"-n", ns.fabric, "link", "set", port, "master", "br0"},
			{"-n", ns.fabric, "link", "set", port, "up"},
			{"-n", n, "addr", "add", addr + "/24", "dev", "eth0"},
			{"-n", n, "link", "set", "eth0", "up"},
		} {
			if err := ip(args...); err != nil {
				return err
			}
		}
		return nil
	}
	if err := plug(ns.front, "pf", frontIP); err != nil {
		return err
	}
	for i, n := range ns.replica {
		if err := plug(n, "p"+strconv.Itoa(i), replicaIP(i)); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes the namespaces, and with them their links.
func (ns namespaces) remove() {
	for _, n := range append([]string{ns.fabric, ns.front}, ns.replica...) {
		exec.Command("ip", "netns", "delete", n).Run()
	}
}

// removeStale deletes the namespaces of runs of this command whose process
// is gone (one killed before it could clean up).
func removeStale() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, "gpf")
		if !ok {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		if n, err := strconv.Atoi(pid); err == nil && !alive(n) {
			exec.Command("ip", "netns", "delete", name).Run()
		}
	}
}

// alive reports whether a process numbered pid (mod 100000, as the names
// carry it) may still run.
func alive(pid int) bool {
	for p := pid; p < 1<<22; p += 100000 {
		if _, err := os.Stat("/proc/" + strconv.Itoa(p)); err == nil {
			return true
		}
	}
	return false
}

// nft runs an nftables script in replica i's namespace.
func (ns namespaces) nft(i int, script string) error {
	cmd := exec.Command("ip", "netns", "exec", ns.replica[i], "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %v: %s", ns.replica[i], err, strings.TrimSpace(string(out)))
	}
	return nil
}

// drop makes replica i drop the packets of rules (nft statements matching
// what to drop), in and out: its own table, gpfault, made afresh.
func (ns namespaces) drop(i int, in, out []string) error {
	var b strings.Builder
	b.WriteString("table inet gpfault\ndelete table inet gpfault\ntable inet gpfault {\n")
	b.WriteString("  chain input { type filter hook input priority 0; policy accept;\n")
	for _, r := range in {
		b.WriteString("    " + r + " drop\n")
	}
	b.WriteString("  }\n  chain output { type filter hook output priority 0; policy accept;\n")
	for _, r := range out {
		b.WriteString("    " + r + " drop\n")
	}
	b.WriteString("  }\n}\n")
	return ns.nft(i, b.String())
}

// clear removes every fault: the rules, and any link set down.
func (ns namespaces) clear() error {
	var first error
	for i := range ns.replica {
		exec.Command("ip", "netns", "exec", ns.replica[i], "nft", "delete", "table", "inet", "gpfault").Run()
		if err := ns.link(i, true); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// link sets replica i's port on the bridge up or down.
func (ns namespaces) link(i int, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return ip("-n", ns.fabric, "link", "set", "p"+strconv.Itoa(i), state)
}

// addrs is the replicas' addresses, as an nftables set.
func addrs(replicas []int) string {
	var ips []string
	for _, i := range replicas {
		ips = append(ips, replicaIP(i))
	}
	return "{ " + join(ips) + " }"
}
