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

// replicas builds this server once and starts real processes of it on
// loopback, each joining the seeds given.
type replicas struct {
	t   *testing.T
	bin string
}

func newReplicas(t *testing.T) *replicas {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := filepath.Join(t.TempDir(), "server")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return &replicas{t, bin}
}

// start runs one replica and returns it with its HTTP and gossip addresses.
func (r *replicas) start(seeds string, env ...string) (*exec.Cmd, string, string) {
	t := r.t
	t.Helper()
	cmd := exec.Command(r.bin)
	cmd.Env = append(append(os.Environ(), "GOPHERPACE_RATE=100", "GOPHERPACE_GOSSIP_PORT=0", "GOPHERPACE_BIND_ADDR=127.0.0.1",
		"GOPHERPACE_HTTP_ADDR=127.0.0.1:0", "GOPHERPACE_SEEDS="+seeds), env...)
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

// known is the number of nodes the replica at httpAddr counts (itself too).
func known(httpAddr string) (int64, bool) {
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

// code is the status path answers with at httpAddr, 0 if none.
func code(httpAddr, path string) int {
	resp, err := http.Get("http://" + httpAddr + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitWhole waits until every replica counts n nodes and sees them all.
func waitWhole(t *testing.T, n int64, addrs ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, a := range addrs {
		for k, _ := known(a); k != n || code(a, "/cluster") != http.StatusOK; k, _ = known(a) {
			if time.Now().After(deadline) {
				t.Fatalf("the servers never saw each other: %s knows %d nodes", a, k)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// A rolling deploy sends SIGTERM: the replica says goodbye, and its peer
// stops counting it at once and is whole again, well inside the 10 s grace
// period. Two real processes of this server, on loopback.
func TestSIGTERMIsALeaveNotACrash(t *testing.T) {
	r := newReplicas(t)
	_, httpA, gossipA := r.start("")
	b, httpB, _ := r.start(gossipA, "GOPHERPACE_DRAIN=700ms")
	waitWhole(t, 2, httpA, httpB)

	if err := b.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	// Draining: b is out of rotation, still serving, still a member.
	for code(httpB, "/readyz") != http.StatusServiceUnavailable {
		if time.Since(sent) > 3*time.Second {
			t.Fatal("b's /readyz never answered 503 after SIGTERM")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if c := code(httpB, "/work"); c != http.StatusOK && c != http.StatusTooManyRequests {
		t.Fatalf("b answered /work with %d while draining", c)
	}
	// The goodbye waits for the drain to end (700 ms).
	if n, _ := known(httpA); n != 2 && time.Since(sent) < 600*time.Millisecond {
		t.Fatalf("a stopped counting b %v after SIGTERM, during b's drain", time.Since(sent))
	}
	exited := make(chan error, 1)
	go func() { exited <- b.Wait() }()
	// A crash would leave b known (and a degraded) until memberlist declares
	// it dead. (A single degraded answer on the way can also come from a
	// CPU-starved machine delaying b's frames, so the test asks where a
	// ends up.)
	degraded := 0
	for {
		if code(httpA, "/cluster") != http.StatusOK {
			degraded++
		}
		if n, ok := known(httpA); ok && n == 1 && code(httpA, "/cluster") == http.StatusOK {
			break
		}
		if time.Since(sent) > 3*time.Second {
			t.Fatalf("3 s after b's SIGTERM a still counts b or is degraded (%d degraded answers): the goodbye was lost", degraded)
		}
		if c := code(httpA, "/readyz"); c != http.StatusOK {
			t.Fatalf("a answered /readyz with %d while its peer left", c)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("a dropped b %v after SIGTERM (%d degraded answers on the way)", time.Since(sent).Round(time.Millisecond), degraded)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("b exited with %v after SIGTERM, want status 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("b did not exit within 15 s of SIGTERM")
	}
}

// A crash (SIGKILL) never makes a survivor unready, and once memberlist's
// failure detection agrees the node is gone (every survivor's probes and
// indirect probes fail), the survivors stop counting it: the whole rate is
// back seconds after the crash, not after the 10 s grace period. Three real
// processes; the bound allows for a loaded machine, the log says how long
// it took (docs/operations.md).
func TestSIGKILLKeepsSurvivorsReadyAndTheRateBack(t *testing.T) {
	r := newReplicas(t)
	_, httpA, gossipA := r.start("")
	_, httpB, _ := r.start(gossipA)
	c, httpC, _ := r.start(gossipA)
	waitWhole(t, 3, httpA, httpB, httpC)

	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var back time.Duration
	for back == 0 {
		for _, a := range []string{httpA, httpB} {
			if got := code(a, "/readyz"); got != http.StatusOK {
				t.Fatalf("%v after a peer's SIGKILL, a survivor answered /readyz with %d", time.Since(killed).Round(time.Millisecond), got)
			}
		}
		na, _ := known(httpA)
		nb, _ := known(httpB)
		if na == 2 && nb == 2 {
			back = time.Since(killed)
		}
		if time.Since(killed) > 7*time.Second {
			t.Fatalf("7 s after the crash the survivors still count it (%d and %d nodes known)", na, nb)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Ready all along, and whole again: /cluster answers 200.
	waitWhole(t, 2, httpA, httpB)
	t.Logf("the survivors stopped counting the crashed node %v after SIGKILL", back.Round(time.Millisecond))
}

// Two crashes of three leave a strict minority. Their ports refuse
// connections (the processes died, their host is up), so the survivor's
// transport knows them gone for good once memberlist declares them dead,
// and the survivor stops counting them: ready all along, and whole again
// with the whole rate, not an outage for the grace period.
func TestSIGKILLOfTwoOfThreeLeavesTheSurvivorServing(t *testing.T) {
	r := newReplicas(t)
	// A grace period far longer than the wait below: only the evidence
	// that the crashed are gone can end their count in time.
	grace := "GOPHERPACE_GRACE=60s"
	_, httpA, gossipA := r.start("", grace)
	b, httpB, _ := r.start(gossipA, grace)
	c, httpC, _ := r.start(gossipA, grace)
	waitWhole(t, 3, httpA, httpB, httpC)
	for _, p := range []*exec.Cmd{b, c} {
		if err := p.Process.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	killed := time.Now()
	for n, _ := known(httpA); n != 1; n, _ = known(httpA) {
		if got := code(httpA, "/readyz"); got != http.StatusOK {
			t.Fatalf("%v after two peers' SIGKILL, the survivor answered /readyz with %d", time.Since(killed).Round(time.Millisecond), got)
		}
		if time.Since(killed) > 20*time.Second {
			t.Fatalf("20 s after the crashes the survivor still counts %d nodes", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the survivor stopped counting both crashed nodes %v after SIGKILL", time.Since(killed).Round(time.Millisecond))
	waitWhole(t, 1, httpA)
}
