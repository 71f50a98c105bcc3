package rlserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A config with what envoyproxy/ratelimit's example config uses: nested
// descriptors, a value-less key, shadow_mode, unlimited, a wildcard,
// detailed_metric and value_to_metric (no effect here), quota_mode
// descriptors with metadata, and replaces. Our own words, its features.
const peerStyleConfig = `
domain: rl
descriptors:
  - key: category
    value: account
    rate_limit: {replaces: [{name: bkthomps}], unit: minute, requests_per_unit: 4}
  - key: source_cluster
    value: proxy
    descriptors:
      - key: destination_cluster
        value: bkthomps
        rate_limit: {name: bkthomps, unit: minute, requests_per_unit: 1}
      - key: destination_cluster
        value: mock
        rate_limit: {unit: minute, requests_per_unit: 1}
  - key: foo
    rate_limit: {unit: minute, requests_per_unit: 2}
    descriptors:
      - key: bar
        detailed_metric: true
        value_to_metric: true
        rate_limit: {unit: minute, requests_per_unit: 3}
      - key: baz
        value: not-so-shady
        shadow_mode: true
        rate_limit: {unit: minute, requests_per_unit: 1}
  - key: qux
    rate_limit: {unlimited: true}
  - key: path
    value: /api/*
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: service
    value: tokens
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
    metadata:
      service_with_quota: {name: tokens}
`

// envoyproxy/ratelimit's example Deployment (its docker-compose service's
// environment), with the image swapped and Redis gone: the same
// variables start this server on the same config directory, and it
// answers the peer's HTTP endpoints. The listen addresses are the one
// change, to loopback ports the OS picks, as every test here binds.
func TestThePeersDeploymentRunsAsItIs(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "example.yaml"), []byte(peerStyleConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		// The compose file's statsd is a service named statsd; here, a
		// socket on loopback.
		"USE_STATSD": "true", "STATSD_HOST": "127.0.0.1", "STATSD_PORT": statsdPort(t), "LOG_LEVEL": "debug",
		"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379",
		"RUNTIME_ROOT": root, "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_WATCH_ROOT": "false", "CONFIG_TYPE": "FILE",
		"GOPHERPACE_ADDR": "127.0.0.1:0", "GOPHERPACE_GRPC_ADDR": "127.0.0.1:0",
	}
	c, err := ParseFlags(nil, envOf(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var logged syncBuffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, log, func(h, _ string) { addrs <- h }, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	var base string
	select {
	case a := <-addrs:
		base = "http://" + a
	case err := <-done:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not start")
	}
	if !strings.Contains(logged.String(), "REDIS_URL") {
		t.Errorf("the Redis variables are not named as ignored:\n%s", logged.String())
	}
	ask := func(descriptor string) (int, string) {
		body := `{"domain":"rl","descriptors":[{"entries":[` + descriptor + `]}]}`
		resp, err := http.Post(base+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i, step := range []struct {
		entries string
		want    int
	}{
		{`{"key":"foo","value":"x"},{"key":"bar","value":"y"}`, 200},
		{`{"key":"foo","value":"x"},{"key":"bar","value":"y"}`, 200},
		{`{"key":"foo","value":"x"},{"key":"bar","value":"y"}`, 200},
		{`{"key":"foo","value":"x"},{"key":"bar","value":"y"}`, 429}, // 3 a minute
		{`{"key":"foo","value":"x"},{"key":"baz","value":"not-so-shady"}`, 200},
		{`{"key":"foo","value":"x"},{"key":"baz","value":"not-so-shady"}`, 200}, // shadow: over, answered OK
		{`{"key":"qux","value":"any"}`, 200},
		{`{"key":"path","value":"/api/a"}`, 200},
		{`{"key":"path","value":"/api/a"}`, 200},
		{`{"key":"path","value":"/api/a"}`, 429}, // a wildcard without share_threshold: a bucket per value
		{`{"key":"path","value":"/api/b"}`, 200},
		{`{"key":"service","value":"tokens"}`, 200},
	} {
		code, body := ask(step.entries)
		if code != step.want {
			t.Fatalf("step %d %s: %d %s, want %d", i, step.entries, code, body, step.want)
		}
	}
	resp, err := http.Get(base + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthcheck: %d", resp.StatusCode)
	}
}

// syncBuffer is a log sink the server's goroutines may write at once.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// statsdPort is the port of a UDP socket on loopback that stands in for
// a statsd server for the test's life.
func statsdPort(t *testing.T) string {
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udp.Close() })
	return strconv.Itoa(udp.LocalAddr().(*net.UDPAddr).Port)
}
