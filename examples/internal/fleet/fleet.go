// Package fleet runs replicas of examples/server behind real HAProxy and
// drives them with Poisson arrivals, counting what each replica admitted:
// what the transitions and faults harnesses share.
//
// HAProxy balances round-robin over a fixed set of slots, checks /readyz
// every 200 ms (two failures take a server out, one success brings it
// back), redispatches a request whose server refused it (up to three
// times), and names the replica that answered in X-Replica.
package fleet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Slots is how many backend servers HAProxy knows: every replica of a
// run, replacements included, gets a slot of its own.
const Slots = 12

// Spawn makes the command that starts replica name in slot, given the
// gossip addresses of the live replicas to join. Fleet adds
// GOPHERPACE_NODE_NAME and GOPHERPACE_SEEDS to its environment.
type Spawn func(name string, slot int) *exec.Cmd

// Replica is one process of examples/server in a backend slot.
type Replica struct {
	Name, HTTP, Gossip string
	Slot               int // HAProxy's server s<Slot>
	Cmd                *exec.Cmd
	Exited             chan struct{}
}

// Fleet is HAProxy and the replicas behind it.
type Fleet struct {
	dir   string
	spawn Spawn
	admin string // HAProxy's admin socket
	stop  func()
	mu    sync.Mutex
	live  []*Replica // by index in the caller's numbering
	next  int        // next free slot
	names int        // replicas started, for fresh names
}

// Start starts HAProxy listening on front, its files in dir, with every
// slot parked until a replica takes it.
func Start(dir, front string, spawn Spawn) (*Fleet, error) {
	f := &Fleet{dir: dir, spawn: spawn}
	if err := f.haproxy(front); err != nil {
		return nil, err
	}
	return f, nil
}

// Live is the replicas, by index.
func (f *Fleet) Live() []*Replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Replica(nil), f.live...)
}

// Add starts a replica under a new name in the next free slot.
func (f *Fleet) Add() error {
	f.mu.Lock()
	f.names++
	name := fmt.Sprintf("replica-%d", f.names)
	f.mu.Unlock()
	r, err := f.start(name)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.live = append(f.live, r)
	f.mu.Unlock()
	return nil
}

// Replace stops replica i with SIGTERM and starts its successor: under a
// new name at once, or under the same name once the old one has exited.
func (f *Fleet) Replace(i int, sameName bool) error {
	f.mu.Lock()
	old := f.live[i]
	f.names++
	name := fmt.Sprintf("replica-%d", f.names)
	f.mu.Unlock()
	if err := old.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if sameName {
		name = old.Name
		select {
		case <-old.Exited:
		case <-time.After(15 * time.Second):
			return fmt.Errorf("%s did not exit within 15 s of SIGTERM", old.Name)
		}
	}
	r, err := f.start(name)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.live[i] = r
	f.mu.Unlock()
	return nil
}

// Signal sends sig to replica i.
func (f *Fleet) Signal(i int, sig os.Signal) error {
	f.mu.Lock()
	r := f.live[i]
	f.mu.Unlock()
	return r.Cmd.Process.Signal(sig)
}

func (f *Fleet) start(name string) (*Replica, error) {
	f.mu.Lock()
	if f.next == Slots {
		f.mu.Unlock()
		return nil, errors.New("out of backend slots")
	}
	slot := f.next
	f.next++
	var seeds []string
	for _, r := range f.live {
		seeds = append(seeds, r.Gossip)
	}
	f.mu.Unlock()
	cmd := f.spawn(name, slot)
	cmd.Env = append(cmd.Env, "GOPHERPACE_NODE_NAME="+name, "GOPHERPACE_SEEDS="+strings.Join(seeds, ","))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &Replica{Name: name, Slot: slot, Cmd: cmd, Exited: make(chan struct{})}
	serving := regexp.MustCompile(`serving http=(\S+) gossip=(\S+)`)
	lines := bufio.NewScanner(stderr)
	var said []string
	for lines.Scan() {
		if m := serving.FindStringSubmatch(lines.Text()); m != nil {
			r.HTTP, r.Gossip = m[1], m[2]
			break
		}
		said = append(said, lines.Text())
	}
	go func() {
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(r.Exited)
	}()
	if r.HTTP == "" {
		return nil, fmt.Errorf("%s exited before serving: %s", name, strings.Join(said, " / "))
	}
	// Point the slot at the replica and let the checks take it into
	// rotation.
	host, port, _ := net.SplitHostPort(r.HTTP)
	if err := f.command(fmt.Sprintf("set server replicas/s%d addr %s port %s", slot, host, port)); err != nil {
		return nil, err
	}
	if err := f.command(fmt.Sprintf("set server replicas/s%d state ready", slot)); err != nil {
		return nil, err
	}
	return r, nil
}

// WaitFormed waits until every live replica counts n nodes.
func (f *Fleet) WaitFormed(n int, within time.Duration) error {
	for _, r := range f.Live() {
		if err := WaitFor(within, func() bool { return StatsOf(r.HTTP).KnownNodes == int64(n) }); err != nil {
			return fmt.Errorf("%s never counted %d nodes", r.Name, n)
		}
	}
	return nil
}

// Close kills every replica and HAProxy.
func (f *Fleet) Close() {
	f.mu.Lock()
	live := f.live
	f.mu.Unlock()
	for _, r := range live {
		r.Cmd.Process.Kill()
	}
	for _, r := range live {
		<-r.Exited
	}
	if f.stop != nil {
		f.stop()
	}
}

// haproxy starts HAProxy in front of every slot, round-robin, checking
// /readyz every 200 ms; it names the replica that answered in X-Replica.
func (f *Fleet) haproxy(front string) error {
	var b strings.Builder
	f.admin = filepath.Join(f.dir, "haproxy.sock")
	fmt.Fprintf(&b, `global
    maxconn 4096
    stats socket %s level admin
defaults
    mode http
    timeout connect 1s
    timeout client 10s
    timeout server 10s
    # A request whose connection a crashed replica refused goes to
    # another, up to three times (two crashed replicas may sit side by
    # side in the rotation): what any production balancer is configured
    # to do.
    retries 3
    option redispatch 1
frontend work
    bind %s
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /readyz
    http-response set-header X-Replica %%s
`, f.admin, front)
	for i := range Slots {
		// Parked in maintenance until a replica takes the slot (start).
		fmt.Fprintf(&b, "    server s%d 127.0.0.1:1 check inter 200ms fall 2 rise 1 disabled\n", i)
	}
	cfg := filepath.Join(f.dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return err
	}
	cmd := exec.Command("haproxy", "-db", "-f", cfg)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return err
	}
	f.stop = func() { cmd.Process.Kill(); cmd.Wait() }
	if err := WaitFor(10*time.Second, func() bool { return f.command("show info") == nil }); err != nil {
		f.stop()
		return errors.New("HAProxy did not start (its admin socket never answered)")
	}
	return nil
}

// command sends one command to HAProxy's admin socket.
func (f *Fleet) command(c string) error {
	conn, err := net.Dial("unix", f.admin)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, c+"\n"); err != nil {
		return err
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(string(out)); s != "" && !strings.HasPrefix(c, "show") && !strings.Contains(s, "changed") {
		return fmt.Errorf("haproxy %q: %s", c, s)
	}
	return nil
}

// WaitFor polls cond every 20 ms until it holds, or errs after within.
func WaitFor(within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
