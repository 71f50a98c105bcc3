package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The built binary, as a user runs it: gopherpace serve answers the seed's
// quick check over real HTTP, and SIGTERM ends it cleanly.
func TestServeAsBuilt(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gopherpace")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "-addr", "127.0.0.1:0", "-rate", "10", "-burst", "10")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	addrs := make(chan string, 1)
	var logs bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`msg=serving addr=(\S+)`)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addrs <- m[1]
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var addr string
	select {
	case addr = <-addrs:
	case <-time.After(20 * time.Second):
		t.Fatalf("the server never said where it listens:\n%s", logs.String())
	}
	for attempt := 0; ; attempt++ {
		key := "t" + strconv.Itoa(attempt)
		start := time.Now()
		var codes []int
		for range 12 {
			resp, err := http.Get("http://" + addr + "/allow?key=" + key)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes = append(codes, resp.StatusCode)
		}
		if time.Since(start) >= 90*time.Millisecond && attempt < 20 {
			continue // a token came back meanwhile: try again on a fresh key
		}
		if want := []int{200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 429, 429}; !equal(codes, want) {
			t.Fatalf("the seed's quick check: %v, want %v", codes, want)
		}
		break
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the server did not stop on SIGTERM")
	}
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
	for _, flag := range []string{"-addr", "-rate", "-burst", "-limits", "-sweep", "-seeds", "-bind", "-port", "-node", "-secret-key"} {
		if !strings.Contains(errs.String(), flag) {
			t.Errorf("-h does not document %s", flag)
		}
	}
	for args, says := range map[string]string{
		"-rate x":                  "-rate:",
		"-rate 0":                  "-rate:",
		"-burst -1":                "-burst:",
		"-limits a=1":              "-limits:",
		"-limits a=1:2,a=3:4":      "given twice",
		"-sweep soon":              "-sweep:",
		"-port 70000":              "-port:",
		"-secret-key c2hvcnQ=":     "-secret-key:",
		"-secret-key not-base64!!": "-secret-key:",
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
	if code := run([]string{"frobnicate"}, noEnv, &out, &errs); code != 2 {
		t.Errorf("an unknown command: exit %d", code)
	}
}
