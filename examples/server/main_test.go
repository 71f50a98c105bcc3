package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/connlimit"
	"github.com/pedreviljoen/gopherpace/core/status"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadConfig(t *testing.T) {
	c, err := loadConfig(env(map[string]string{
		"GOPHERPACE_RATE": "1000", "GOPHERPACE_DNS": "svc", "GOPHERPACE_SEEDS": "10.0.0.5:7946",
		"GOPHERPACE_SECRET_KEY": "MDEyMzQ1Njc4OWFiY2RlZg==", "GOPHERPACE_PARTITION": "fail-closed",
		"GOPHERPACE_DRAIN": "5s", "GOPHERPACE_GRACE": "30s", "GOPHERPACE_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.0/24",
	}))
	if err != nil || c.rate != 1000 || c.burst != 1000 || c.clientRate != 10 || len(c.trusted) != 2 || c.showKeys || c.seeds == nil || c.partition != gopherpace.PartitionFailClosed || c.drain != 5*time.Second || c.grace != 30*time.Second {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []map[string]string{
		{},
		{"GOPHERPACE_RATE": "x"},
		{"GOPHERPACE_RATE": "1", "GOPHERPACE_BURST": "y"},
		{"GOPHERPACE_RATE": "1", "GOPHERPACE_GOSSIP_PORT": "z"},
		{"GOPHERPACE_RATE": "1", "GOPHERPACE_SECRET_KEY": "%%%"},
		{"GOPHERPACE_RATE": "1", "GOPHERPACE_PARTITION": "sometimes"},
		{"GOPHERPACE_RATE": "1", "GOPHERPACE_DRAIN": "5"},
		{"GOPHERPACE_RATE": "1", "GOPHERPACE_DRAIN": "-1s"},
		{"GOPHERPACE_RATE": "1", "GOPHERPACE_GRACE": "0s"},
		{"GOPHERPACE_RATE": "1", "GOPHERPACE_GRACE": "ten"},
		{"GOPHERPACE_RATE": "1", "GOPHERPACE_CLIENT_RATE": "0"},
		{"GOPHERPACE_RATE": "1", "GOPHERPACE_TRUSTED_PROXIES": "10.0.0.0/8,proxy"},
	} {
		if _, err := loadConfig(env(bad)); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// startServer starts a server configured as the examples configure
// them, on loopback, with extra over the test's defaults; it returns its
// HTTP and gossip addresses (an error of serve's, or nil, arrives on
// done once ctx ends).
func startServer(t *testing.T, ctx context.Context, extra map[string]string) (addrs [2]string, done chan error) {
	t.Helper()
	addrs, done, err := tryServer(ctx, extra)
	if err != nil {
		t.Fatal(err)
	}
	return addrs, done
}

// tryServer is startServer, returning the error that kept it from serving.
func tryServer(ctx context.Context, extra map[string]string) (addrs [2]string, done chan error, err error) {
	vars := map[string]string{"GOPHERPACE_RATE": "1", "GOPHERPACE_BURST": "4",
		"GOPHERPACE_GOSSIP_PORT": "0", "GOPHERPACE_BIND_ADDR": "127.0.0.1", "GOPHERPACE_HTTP_ADDR": "127.0.0.1:0"}
	for k, v := range extra {
		vars[k] = v
	}
	cfg, err := loadConfig(env(vars))
	if err != nil {
		return addrs, nil, err
	}
	ready, done := make(chan [2]string, 1), make(chan error, 1)
	go func() { done <- serve(ctx, cfg, ready) }()
	select {
	case addrs = <-ready:
		return addrs, done, nil
	case err := <-done:
		return addrs, nil, err
	}
}

// get answers a GET of path from the server at addr.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitHeard waits until the server at addr has heard n nodes, itself
// included.
func waitHeard(t *testing.T, addr string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, stats := get(t, addr, "/stats")
		if strings.Contains(stats, fmt.Sprintf(`"HeardNodes":%d`, n)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("servers never heard each other: %s", stats)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two servers configured as the examples configure them, on loopback.
func TestTwoServersShareOneLimit(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, doneA := startServer(t, ctx, nil)
	b, doneB := startServer(t, ctx, map[string]string{"GOPHERPACE_SEEDS": a[1]})
	waitHeard(t, b[0], 2)
	deadline := time.Now().Add(5 * time.Second)
	// A bucket of 4 for the whole cluster, spent on server a (which may
	// ask for a millisecond's pause once it holds its share of the burst
	// unreported)...
	for spent := 0; spent < 4; {
		if c, _ := get(t, a[0], "/work"); c == http.StatusOK {
			spent++
		}
		if time.Now().After(deadline) {
			t.Fatalf("spent only %d tokens on a", spent)
		}
	}
	// ...is charged to b as soon as a reports it...
	for {
		_, stats := get(t, b[0], "/stats")
		if strings.Contains(stats, `"TokensCharged":4`) {
			break
		}
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatalf("b was never charged a's 4 tokens: %s", stats)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// ...so b has nothing left to give (refill is 1/s).
	if c, _ := get(t, b[0], "/work"); c != http.StatusTooManyRequests {
		t.Fatalf("b answered %d after the cluster's bucket was spent on a, want 429", c)
	}
	if c, _ := get(t, b[0], "/healthz"); c != http.StatusOK {
		t.Fatalf("healthz %d", c)
	}
	if c, body := get(t, b[0], "/readyz"); c != http.StatusOK || body != "ready: deciding requests\n" {
		t.Fatalf("readyz %d %q", c, body)
	}
	if c, body := get(t, b[0], "/cluster"); c != http.StatusOK || !strings.Contains(body, "2 of 2 known nodes in sight") {
		t.Fatalf("cluster %d %q", c, body)
	}
	if c, body := get(t, b[0], "/status"); c != http.StatusOK || !strings.Contains(body, "<svg") && !strings.Contains(body, "the chart fills") {
		t.Fatalf("status page %d", c)
	}
	if c, body := get(t, b[0], "/metrics"); c != http.StatusOK || !strings.Contains(body, `gopherpace_gossip_tokens_total{direction="charged",limiter="work"} 4`) ||
		!strings.Contains(body, `gopherpace_transport_members{transport="memberlist"} 2`) {
		t.Fatalf("metrics %d %q", c, body)
	}
	cancel()
	for _, done := range []chan error{doneA, doneB} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// 3,000 keep-alive connections from five addresses, each sending one
// request and then idling (what held 3,000 connections open on this
// server before it capped them), leave room for a fresh client: it is
// served within a second, and the server holds no more than its cap.
func TestIdleConnectionsLockNobodyOut(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := loadConfig(env(map[string]string{"GOPHERPACE_RATE": "1000", "GOPHERPACE_GOSSIP_PORT": "0",
		"GOPHERPACE_BIND_ADDR": "127.0.0.1", "GOPHERPACE_HTTP_ADDR": "127.0.0.1:0"}))
	if err != nil {
		t.Fatal(err)
	}
	ready, done := make(chan [2]string, 1), make(chan error, 1)
	go func() { done <- serve(ctx, cfg, ready) }()
	var addr string
	select {
	case a := <-ready:
		addr = a[0]
	case err := <-done:
		t.Fatal(err)
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	closed := 0
	for i := range 3000 {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%5))}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			closed++ // reclaimed already
		}
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}).DialContext}}
	stats := func() (connlimit.Stats, error) {
		var s struct{ Connections connlimit.Stats }
		resp, err := client.Get("http://" + addr + "/stats")
		if err != nil {
			return connlimit.Stats{}, err
		}
		defer resp.Body.Close()
		err = json.NewDecoder(resp.Body).Decode(&s)
		return s.Connections, err
	}
	// Wait until the server has taken in the whole attack, so that the
	// fresh client measures the caps, not the time to serve 3,000
	// requests (while it serves them, on a busy machine, an ask may take
	// longer than the client's second: not what this test measures).
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := stats()
		if err == nil && s.Accepted+s.Refused >= 3000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server took in %+v of 3,000 connections in 30 s (last ask: %v)", s, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range 3 {
		start := time.Now()
		resp, err := client.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("ask %d: a fresh client failed while 3,000 connections were held: %v", i, err)
		}
		resp.Body.Close()
		t.Logf("ask %d: served in %v", i, time.Since(start))
	}
	s, err := stats()
	if err != nil {
		t.Fatalf("a fresh client's /stats while 3,000 connections were held: %v", err)
	}
	if s.Open > connlimit.DefaultTotal || s.Reclaimed+s.Refused < 3000-connlimit.DefaultTotal {
		t.Fatalf("%+v: over the cap of %d, or too few reclaimed or refused", s, connlimit.DefaultTotal)
	}
	t.Logf("after 3,000 idle connections: %+v", s)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// startPair starts two replicas at one HTTP port, on 127.0.0.1 and
// 127.0.0.2. The port is the first one's, chosen by the system for
// 127.0.0.1 only: when another process holds it on 127.0.0.2, both start
// again on another.
func startPair(t *testing.T, ctx context.Context) (a, b [2]string, doneA, doneB chan error) {
	t.Helper()
	vars := map[string]string{"GOPHERPACE_CLIENT_RATE": "1", "GOPHERPACE_SHOW_KEYS": "true"}
	for attempt := 1; ; attempt++ {
		first, stopFirst := context.WithCancel(ctx)
		a, doneA = startServer(t, first, vars)
		_, port, _ := net.SplitHostPort(a[0])
		second := maps.Clone(vars)
		second["GOPHERPACE_BIND_ADDR"], second["GOPHERPACE_HTTP_ADDR"], second["GOPHERPACE_SEEDS"] = "127.0.0.2", "127.0.0.2:"+port, a[1]
		var err error
		if b, doneB, err = tryServer(ctx, second); err == nil {
			// The first replica stops with ctx, as the second does.
			context.AfterFunc(ctx, stopFirst)
			return a, b, doneA, doneB
		}
		stopFirst()
		if err := <-doneA; err != nil {
			t.Fatal(err)
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 10 {
			t.Fatalf("attempt %d: the second replica at port %s: %v", attempt, port, err)
		}
	}
}

// /api is limited per client across the replicas, and /status/topkeys
// names the client it denied: each replica its own count, and with
// ?cluster=true the sum of both, read on each replica's address at one
// HTTP port (two loopback addresses stand for two pods), as the cluster
// page reads each replica's view.
func TestTopKeysOfTheReplicas(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b, doneA, doneB := startPair(t, ctx)
	waitHeard(t, a[0], 2)
	denied := 0
	for range 4 {
		for _, addr := range []string{a[0], b[0]} {
			switch c, _ := get(t, addr, "/api"); c {
			case http.StatusTooManyRequests:
				denied++
			case http.StatusOK:
			default:
				t.Fatalf("/api answered %d", c)
			}
		}
	}
	if denied < 4 {
		t.Fatalf("%d of 8 requests denied at one a second per client", denied)
	}
	read := func(addr, query string) status.TopKeysView {
		t.Helper()
		c, body := get(t, addr, "/status/topkeys"+query)
		var v status.TopKeysView
		if err := json.Unmarshal([]byte(body), &v); c != http.StatusOK || err != nil {
			t.Fatalf("/status/topkeys%s: %d %q %v", query, c, body, err)
		}
		return v
	}
	own := uint64(0)
	var client string
	for _, addr := range []string{a[0], b[0]} {
		v := read(addr, "")
		if len(v.Denied) != 1 || v.Denied[0].Key == "" {
			t.Fatalf("%s's own top keys: %+v", addr, v)
		}
		if client != "" && v.Denied[0].Key != client {
			t.Fatalf("the replicas name the client %q and %q", client, v.Denied[0].Key)
		}
		client = v.Denied[0].Key
		own += v.Denied[0].Count
	}
	if own != uint64(denied) {
		t.Fatalf("the replicas counted %d denials, the client saw %d", own, denied)
	}
	// The cluster page reads b's /status the same way.
	c, body := get(t, a[0], "/status/cluster?format=json")
	var cv status.ClusterView
	if err := json.Unmarshal([]byte(body), &cv); c != http.StatusOK || err != nil || len(cv.Nodes) != 2 || cv.Nodes[1].Unreachable != "" {
		t.Fatalf("cluster page: %d %q %v", c, body, err)
	}
	all := read(a[0], "?cluster=true")
	if len(all.Nodes) != 2 || len(all.Unreachable) != 0 || len(all.Denied) != 1 || all.Denied[0].Key != client || all.Denied[0].Count != own {
		t.Fatalf("the cluster's top keys: %+v, want %s denied %d times on 2 nodes", all, client, own)
	}
	cancel()
	for _, done := range []chan error{doneA, doneB} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
