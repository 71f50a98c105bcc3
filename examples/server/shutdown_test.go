package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// A rolling deploy sends SIGTERM: the replica says goodbye, and its peer
// stops counting it at once (well inside the 10 s grace period a crash
// would take) without ever turning unready. Two real processes of this
// server, on loopback.
func TestSIGTERMIsALeaveNotACrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := filepath.Join(t.TempDir(), "server")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	start := func(seeds string) (*exec.Cmd, string, string) {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "GOPHERPACE_RATE=100", "GOPHERPACE_GOSSIP_PORT=0", "GOPHERPACE_BIND_ADDR=127.0.0.1",
			"GOPHERPACE_HTTP_ADDR=127.0.0.1:0", "GOPHERPACE_SEEDS="+seeds)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		serving := regexp.MustCompile(`serving http=(\S+) gossip=(\S+)`)
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			if m := serving.FindStringSubmatch(lines.Text()); m != nil {
				go func() {
					for lines.Scan() { // keep the pipe drained
					}
				}()
				return cmd, m[1], m[2]
			}
		}
		t.Fatal("the server exited before serving")
		return nil, "", ""
	}
	known := func(httpAddr string) (int64, bool) {
		resp, err := http.Get("http://" + httpAddr + "/stats")
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		var s struct{ Limiter struct{ KnownNodes int64 } }
		if json.NewDecoder(resp.Body).Decode(&s) != nil {
			return 0, false
		}
		return s.Limiter.KnownNodes, true
	}
	ready := func(httpAddr string) int {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	_, httpA, gossipA := start("")
	b, httpB, _ := start(gossipA)
	deadline := time.Now().Add(10 * time.Second)
	for n, _ := known(httpA); n != 2 || ready(httpA) != http.StatusOK || ready(httpB) != http.StatusOK; n, _ = known(httpA) {
		if time.Now().After(deadline) {
			t.Fatalf("the two servers never saw each other: a knows %d nodes", n)
		}
		time.Sleep(20 * time.Millisecond)
	}

	if err := b.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	exited := make(chan error, 1)
	go func() { exited <- b.Wait() }()
	for {
		if code := ready(httpA); code != http.StatusOK {
			t.Fatalf("a answered /readyz %d %v after b's SIGTERM: a leave looked like a partition", code, time.Since(sent))
		}
		if n, ok := known(httpA); ok && n == 1 {
			break
		}
		if time.Since(sent) > 3*time.Second {
			t.Fatal("a still counts b 3 s after b's SIGTERM: the goodbye was lost, and a waits out the grace period")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("a dropped b %v after SIGTERM", time.Since(sent).Round(time.Millisecond))
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("b exited with %v after SIGTERM, want status 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("b did not exit within 15 s of SIGTERM")
	}
}
