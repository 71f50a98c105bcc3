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
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// slots is how many backend servers HAProxy knows: every replica of a run,
// replacements included, gets a slot of its own.
const slots = 12

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
	do func(h *harness) error
}

func scenarios() []scenario {
	rolling := func(sameName bool) []event {
		var evs []event
		for i := range 5 {
			evs = append(evs, event{time.Duration(2+4*i) * time.Second, func(h *harness) error {
				return h.replace(i, sameName)
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
		{name: "scale-out", start: 3, duration: 20 * time.Second, events: []event{{10 * time.Second, func(h *harness) error {
			return errors.Join(h.add(), h.add())
		}}}, what: "3 → 5, scale-out half way"},
		{name: "scale-in", start: 5, duration: 20 * time.Second, events: []event{{10 * time.Second, func(h *harness) error {
			return errors.Join(h.stop(3, syscall.SIGTERM), h.stop(4, syscall.SIGTERM))
		}}}, what: "5 → 3, scale-in half way (two replicas SIGTERMed at once)"},
		{name: "crash", start: 3, duration: 21 * time.Second, events: []event{{7 * time.Second, func(h *harness) error {
			return h.stop(2, syscall.SIGKILL)
		}}}, what: "3 replicas, one SIGKILLed at 7 s, not replaced"},
		{name: "crash-replace", start: 3, duration: 21 * time.Second, events: []event{{7 * time.Second, func(h *harness) error {
			return errors.Join(h.stop(2, syscall.SIGKILL), h.add())
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
		if len(names) == 0 || contains(names, sc.name) {
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
			fmt.Printf("| %s | %d | %.4f | %s | %d |\n", sc.what, r, res.total, res.spread(), res.failed)
		}
	}
	if failed {
		return errors.New("some runs failed")
	}
	return nil
}

// result is one run's outcome.
type result struct {
	total  float64            // admitted / (R·t+B)
	ratios map[string]float64 // replica's admit ratio / the cluster's
	failed int64
}

func (r result) spread() string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range r.ratios {
		lo, hi = min(lo, v), max(hi, v)
	}
	if len(r.ratios) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f–%.2f", lo, hi)
}

// replica is one process of examples/server in a backend slot.
type replica struct {
	name, http, gossip string
	slot               int // HAProxy's server s<slot>
	cmd                *exec.Cmd
	exited             chan struct{}
}

type harness struct {
	dir, bin string
	rate     int64
	admin    string // HAProxy's admin socket
	mu       sync.Mutex
	live     []*replica // by index in the scenario's numbering
	next     int        // next free slot
	names    int        // replicas started, for fresh names
}

func measure(dir, bin string, sc scenario, rate int64, load float64) (result, error) {
	h := &harness{dir: dir, bin: bin, rate: rate}
	defer h.close()
	front, err := freePort()
	if err != nil {
		return result{}, err
	}
	stopLB, err := h.haproxy(front)
	if err != nil {
		return result{}, err
	}
	defer stopLB()
	for range sc.start {
		if err := h.add(); err != nil {
			return result{}, err
		}
	}
	if err := h.waitFormed(sc.start, 20*time.Second); err != nil {
		return result{}, err
	}
	// HAProxy's checks find every replica up within a few intervals.
	if err := waitFor(10*time.Second, func() bool { return get("http://127.0.0.1:"+itoa(front)+"/readyz") == http.StatusOK }); err != nil {
		return result{}, errors.New("HAProxy never saw a replica up")
	}
	time.Sleep(time.Second) // every check has passed at least once

	ctx, cancel := context.WithTimeout(context.Background(), sc.duration)
	defer cancel()
	errc := make(chan error, len(sc.events))
	start := time.Now()
	for _, ev := range sc.events {
		t := time.AfterFunc(ev.at, func() { errc <- ev.do(h) })
		defer t.Stop()
	}
	counts := generate(ctx, "http://127.0.0.1:"+itoa(front)+"/work", float64(rate)*load)
	elapsed := time.Since(start)
	select {
	case err := <-errc:
		if err != nil {
			return result{}, err
		}
	default:
	}
	return counts.result(float64(rate)*elapsed.Seconds() + float64(rate)), nil
}

// add starts a replica under a new name in the next free slot.
func (h *harness) add() error {
	h.mu.Lock()
	h.names++
	name := fmt.Sprintf("replica-%d", h.names)
	h.mu.Unlock()
	r, err := h.spawn(name)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.live = append(h.live, r)
	h.mu.Unlock()
	return nil
}

// replace stops replica i with SIGTERM and starts its successor: under a
// new name at once, or under the same name once the old one has exited.
func (h *harness) replace(i int, sameName bool) error {
	h.mu.Lock()
	old := h.live[i]
	h.names++
	name := fmt.Sprintf("replica-%d", h.names)
	h.mu.Unlock()
	if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if sameName {
		name = old.name
		select {
		case <-old.exited:
		case <-time.After(15 * time.Second):
			return fmt.Errorf("%s did not exit within 15 s of SIGTERM", old.name)
		}
	}
	r, err := h.spawn(name)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.live[i] = r
	h.mu.Unlock()
	return nil
}

// stop sends sig to replica i.
func (h *harness) stop(i int, sig syscall.Signal) error {
	h.mu.Lock()
	r := h.live[i]
	h.mu.Unlock()
	return r.cmd.Process.Signal(sig)
}

func (h *harness) spawn(name string) (*replica, error) {
	h.mu.Lock()
	if h.next == slots {
		h.mu.Unlock()
		return nil, errors.New("out of backend slots")
	}
	slot := h.next
	h.next++
	var seeds []string
	for _, r := range h.live {
		seeds = append(seeds, r.gossip)
	}
	h.mu.Unlock()
	cmd := exec.Command(h.bin)
	cmd.Env = append(os.Environ(),
		"GOPHERPACE_RATE="+itoa64(h.rate), "GOPHERPACE_BURST="+itoa64(h.rate),
		"GOPHERPACE_GOSSIP_PORT=0", "GOPHERPACE_BIND_ADDR=127.0.0.1",
		"GOPHERPACE_HTTP_ADDR=127.0.0.1:0",
		"GOPHERPACE_NODE_NAME="+name, "GOPHERPACE_SEEDS="+strings.Join(seeds, ","),
		// Out of HAProxy's rotation (two failed checks 200 ms apart)
		// before the server stops accepting.
		"GOPHERPACE_DRAIN=1s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &replica{name: name, slot: slot, cmd: cmd, exited: make(chan struct{})}
	serving := regexp.MustCompile(`serving http=(\S+) gossip=(\S+)`)
	lines := bufio.NewScanner(stderr)
	var said []string
	for lines.Scan() {
		if m := serving.FindStringSubmatch(lines.Text()); m != nil {
			r.http, r.gossip = m[1], m[2]
			break
		}
		said = append(said, lines.Text())
	}
	go func() {
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(r.exited)
	}()
	if r.http == "" {
		return nil, fmt.Errorf("%s exited before serving: %s", name, strings.Join(said, " / "))
	}
	// Point the slot at the replica and let the checks take it into
	// rotation.
	host, port, _ := net.SplitHostPort(r.http)
	if err := h.command(fmt.Sprintf("set server replicas/s%d addr %s port %s", slot, host, port)); err != nil {
		return nil, err
	}
	if err := h.command(fmt.Sprintf("set server replicas/s%d state ready", slot)); err != nil {
		return nil, err
	}
	return r, nil
}

// waitFormed waits until n replicas each count n nodes.
func (h *harness) waitFormed(n int, within time.Duration) error {
	h.mu.Lock()
	live := append([]*replica(nil), h.live...)
	h.mu.Unlock()
	for _, r := range live {
		if err := waitFor(within, func() bool { return knownNodes(r.http) == n }); err != nil {
			return fmt.Errorf("%s never counted %d nodes", r.name, n)
		}
	}
	return nil
}

func (h *harness) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.live {
		r.cmd.Process.Kill()
	}
	for _, r := range h.live {
		<-r.exited
	}
}

// haproxy starts HAProxy in front of every slot, round-robin, checking
// /readyz every 200 ms; it names the replica that answered in X-Replica.
func (h *harness) haproxy(front int) (stop func(), err error) {
	var b strings.Builder
	h.admin = filepath.Join(h.dir, "haproxy.sock")
	fmt.Fprintf(&b, `global
    maxconn 4096
    stats socket %s level admin
defaults
    mode http
    timeout connect 1s
    timeout client 10s
    timeout server 10s
    # A request sent to a replica that crashed goes to another once: what
    # any production balancer is configured to do.
    retries 1
    option redispatch 1
frontend work
    bind 127.0.0.1:%d
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /readyz
    http-response set-header X-Replica %%s
`, h.admin, front)
	for i := range slots {
		// Parked in maintenance until a replica takes the slot (spawn).
		fmt.Fprintf(&b, "    server s%d 127.0.0.1:1 check inter 200ms fall 2 rise 1 disabled\n", i)
	}
	cfg := filepath.Join(h.dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("haproxy", "-db", "-f", cfg)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() { cmd.Process.Kill(); cmd.Wait() }
	if err := waitFor(10*time.Second, func() bool { return h.command("show info") == nil }); err != nil {
		stop()
		return nil, errors.New("HAProxy did not start (its admin socket never answered)")
	}
	return stop, nil
}

// command sends one command to HAProxy's admin socket.
func (h *harness) command(c string) error {
	conn, err := net.Dial("unix", h.admin)
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

// counts is what the load generator saw, per replica (by HAProxy's server
// name) and per second of the run.
type counts struct {
	mu                sync.Mutex
	start             time.Time
	offered, admitted map[string][]int64
	failed            atomic.Int64
}

func (c *counts) add(who string, admitted bool) {
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

// result compares each replica with the cluster second by second: its
// admits against what the cluster's admit ratio in each second would have
// given its offered load, so that a replica that lived for part of the run
// is compared with the same seconds.
func (c *counts) result(ideal float64) result {
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
	res := result{total: float64(a) / ideal, ratios: map[string]float64{}, failed: c.failed.Load()}
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
		res.ratios[who] = float64(got) / want
	}
	return res
}

// generate sends Poisson arrivals at perSecond to url until ctx ends, each
// request on its own goroutine, at most 512 in flight (beyond that an
// arrival counts as failed: the cluster did not keep up).
func generate(ctx context.Context, url string, perSecond float64) *counts {
	c := &counts{start: time.Now(), offered: map[string][]int64{}, admitted: map[string][]int64{}}
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
	return c
}

func knownNodes(httpAddr string) int {
	resp, err := http.Get("http://" + httpAddr + "/stats")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`"KnownNodes":(\d+)`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	n := 0
	fmt.Sscan(string(m[1]), &n)
	return n
}

func get(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitFor(within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// freePort asks the OS for a free loopback port (HAProxy's configuration
// needs the backends' ports before they start).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func itoa(n int) string     { return fmt.Sprint(n) }
func itoa64(n int64) string { return fmt.Sprint(n) }
