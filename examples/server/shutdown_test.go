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
// stops counting it at once and is ready, well inside the 10 s grace
// period a crash takes. Two real processes of this server, on loopback.
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
	// A crash would leave a unready, b out of sight, for the 10 s grace
	// period. (A single 503 on the way can also come from a CPU-starved
	// machine delaying b's frames, so the test asks where a ends up.)
	unready := 0
	for {
		if ready(httpA) != http.StatusOK {
			unready++
		}
		if n, ok := known(httpA); ok && n == 1 && ready(httpA) == http.StatusOK {
			break
		}
		if time.Since(sent) > 3*time.Second {
			t.Fatalf("3 s after b's SIGTERM a still counts b or is unready (%d unready answers): the goodbye was lost, and a waits out the grace period", unready)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("a dropped b %v after SIGTERM (%d unready answers on the way)", time.Since(sent).Round(time.Millisecond), unready)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("b exited with %v after SIGTERM, want status 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("b did not exit within 15 s of SIGTERM")
	}
}
