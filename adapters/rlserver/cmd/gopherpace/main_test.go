package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A running gopherpace binary.
type proc struct {
	http, grpc, gossip string
	cmd                *exec.Cmd
	exited             chan error
	logs               *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) add(line string) { s.mu.Lock(); s.b.WriteString(line + "\n"); s.mu.Unlock() }
func (s *syncBuffer) String() string  { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gopherpace")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// start runs bin serve args and waits until it says where it listens
// (and, clustered, where it gossips).
func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	return startWith(t, bin, nil, args...)
}

// startWith is start with env added to this process's environment.
func startWith(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	if !slices.Contains(args, "-grpc-addr") {
		args = append(args, "-grpc-addr", "127.0.0.1:0")
	}
	p := &proc{cmd: exec.Command(bin, append([]string{"serve"}, args...)...), exited: make(chan error, 1), logs: &syncBuffer{}}
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	httpAddr, gossipAddr := make(chan [2]string, 1), make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		serving := regexp.MustCompile(`msg=serving addr=(\S+) grpc=(\S+)`)
		gossip := regexp.MustCompile(`gossip transport started.* addr=(\S+)`)
		for sc.Scan() {
			p.logs.add(sc.Text())
			if m := serving.FindStringSubmatch(sc.Text()); m != nil {
				httpAddr <- [2]string{m[1], m[2]}
			}
			if m := gossip.FindStringSubmatch(sc.Text()); m != nil {
				gossipAddr <- m[1]
			}
		}
		p.exited <- p.cmd.Wait()
	}()
	select {
	case addrs := <-httpAddr:
		p.http, p.grpc = addrs[0], addrs[1]
	case <-time.After(20 * time.Second):
		t.Fatalf("the server never said where it listens:\n%s", p.logs.String())
	}
	select {
	case p.gossip = <-gossipAddr:
	default:
	}
	return p
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitExit(t)
}

// waitExit waits for a clean exit after a SIGTERM.
func (p *proc) waitExit(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("after SIGTERM: %v\n%s", err, p.logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the server did not stop on SIGTERM")
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// The built binary, as a user runs it: gopherpace serve answers the seed's
// quick check over real HTTP, and SIGTERM ends it cleanly.
func TestServeAsBuilt(t *testing.T) {
	p := start(t, build(t), "-addr", "127.0.0.1:0", "-rate", "10", "-burst", "10")
	for attempt := 0; ; attempt++ {
		key := "t" + strconv.Itoa(attempt)
		begin := time.Now()
		var codes []int
		for range 12 {
			code, _ := get(t, "http://"+p.http+"/allow?key="+key)
			codes = append(codes, code)
		}
		if time.Since(begin) >= 90*time.Millisecond && attempt < 20 {
			continue // a token came back meanwhile: try again on a fresh key
		}
		if want := []int{200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 429, 429}; !equal(codes, want) {
			t.Fatalf("the seed's quick check: %v, want %v", codes, want)
		}
		break
	}
	p.stop(t)
	// docs/service.md's check at -rate 1 -burst 10, asked as slowly as
	// twelve curl processes ask (35 ms apart: 0.4 s in all, under the
	// second a token takes to come back).
	p = start(t, build(t), "-addr", "127.0.0.1:0", "-rate", "1", "-burst", "10")
	for attempt := 0; ; attempt++ {
		key := "slow" + strconv.Itoa(attempt)
		begin := time.Now()
		var codes []int
		for range 12 {
			code, _ := get(t, "http://"+p.http+"/allow?key="+key)
			codes = append(codes, code)
			time.Sleep(35 * time.Millisecond)
		}
		if time.Since(begin) >= 900*time.Millisecond && attempt < 5 {
			continue // a starved machine took a second: a token came back
		}
		if want := []int{200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 429, 429}; !equal(codes, want) {
			t.Fatalf("docs/service.md's quick check: %v, want %v", codes, want)
		}
		break
	}
	p.stop(t)
}

// Two replicas of the binary over real memberlist on loopback share one
// limit: what one admits, the other denies, once its report has arrived.
func TestTwoReplicasShareALimit(t *testing.T) {
	bin := build(t)
	common := []string{"-addr", "127.0.0.1:0", "-rate", "1", "-burst", "10", "-bind", "127.0.0.1", "-port", "0"}
	a := start(t, bin, append(common, "-node", "a")...)
	if a.gossip == "" {
		t.Fatalf("replica a never said where it gossips:\n%s", a.logs.String())
	}
	b := start(t, bin, append(common, "-node", "b", "-seeds", a.gossip)...)
	heard := regexp.MustCompile(`gopherpace_cluster_peers\{limiter="service",state="heard"\} 2`)
	for _, p := range []*proc{a, b} {
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, m := get(t, "http://"+p.http+"/metrics"); heard.MatchString(m) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the replicas never heard each other:\n%s\n%s", a.logs.String(), b.logs.String())
			}
		}
	}
	admitted := 0
	for range 10 {
		if code, _ := get(t, "http://"+a.http+"/allow?key=tenant"); code == 200 {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("replica a admitted %d of its first 10", admitted)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if code, _ := get(t, "http://"+b.http+"/allow?key=tenant"); code == 429 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("replica b still admits after replica a spent the shared bucket")
		}
	}
	// SIGTERM leaves the cluster cleanly: b says goodbye, so a counts it
	// gone at once (a crash would keep it known, out of sight, for the
	// grace period) and is not partitioned.
	b.stop(t)
	gone := regexp.MustCompile(`gopherpace_cluster_peers\{limiter="service",state="known"\} 1\n`)
	whole := regexp.MustCompile(`gopherpace_cluster_partitioned\{limiter="service"\} 0\n`)
	left := time.Now()
	for deadline := left.Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, m := get(t, "http://"+a.http+"/metrics"); gone.MatchString(m) && whole.MatchString(m) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("replica a still counts b 5 s after b's SIGTERM (grace period 10 s: no goodbye?):\n%s", m)
		}
	}
	t.Logf("replica a counted b gone %v after b exited", time.Since(left).Round(time.Millisecond))
	a.stop(t)
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// -h lists every flag; a bad value or a bad line of -limits is refused,
// naming the flag.
func TestFlags(t *testing.T) {
	var out, errs bytes.Buffer
	noEnv := func(string) string { return "" }
	if code := run([]string{"serve", "-h"}, noEnv, &out, &errs); code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	for _, flag := range []string{"-addr", "-grpc-addr", "-config", "-config-poll", "-response-headers", "-max-keys", "-drain", "-rate", "-burst", "-limits", "-sweep", "-seeds", "-bind", "-port", "-node", "-secret-key",
		"-max-conns", "-max-conns-per-client", "-grpc-reflection", "-tls-cert", "-tls-key", "-client-ca", "-key-hash-secret"} {
		if !strings.Contains(errs.String(), flag) {
			t.Errorf("-h does not document %s", flag)
		}
	}
	for args, says := range map[string]string{
		"-rate x":                                "-rate:",
		"-rate 0":                                "-rate:",
		"-burst -1":                              "-burst:",
		"-limits a=1":                            "-limits:",
		"-limits a=1:2,a=3:4":                    "given twice",
		"-sweep soon":                            "-sweep:",
		"-port 70000":                            "-port:",
		"-secret-key c2hvcnQ=":                   "-secret-key:",
		"-secret-key not-base64!!":               "-secret-key:",
		"-config-poll 0s":                        "-config-poll:",
		"-max-keys 0":                            "-max-keys:",
		"-drain soon":                            "-drain:",
		"-max-conns 0":                           "-max-conns:",
		"-max-conns-per-client x":                "-max-conns-per-client:",
		"-max-conns 10 -max-conns-per-client 11": "-max-conns-per-client:",
		"-tls-cert a.pem":                        "-tls-cert:",
		"-client-ca ca.pem":                      "-client-ca:",
		"-key-hash-secret c2hvcnQ=":              "-key-hash-secret:",
	} {
		errs.Reset()
		if code := run(append([]string{"serve"}, strings.Fields(args)...), noEnv, &out, &errs); code != 2 || !strings.Contains(errs.String(), says) {
			t.Errorf("%s: exit %d, %q; want 2 saying %q", args, code, errs.String(), says)
		}
	}
	env := func(k string) string { return map[string]string{"GOPHERPACE_RATE": "x"}[k] }
	errs.Reset()
	if code := run([]string{"serve", "-rate", "5", "-addr", "127.0.0.1:bad"}, env, &out, &errs); code != 1 || !strings.Contains(errs.String(), "-addr") {
		t.Errorf("a flag wins over the environment, and a bad -addr is refused: exit %d, %q", code, errs.String())
	}
	// Gossip off loopback without a key is refused, in the flags' words
	// (nothing is bound: the refusal comes first).
	errs.Reset()
	if code := run([]string{"serve", "-bind", "10.1.2.3", "-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, noEnv, &out, &errs); code != 1 ||
		!strings.Contains(errs.String(), "-secret-key") || strings.Contains(errs.String(), "WithSecretKeys") {
		t.Errorf("plaintext gossip off loopback: exit %d, %q; want 1 naming -secret-key", code, errs.String())
	}
	if code := run([]string{"frobnicate"}, noEnv, &out, &errs); code != 2 {
		t.Errorf("an unknown command: exit %d", code)
	}
}
