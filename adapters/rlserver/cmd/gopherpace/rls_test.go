package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func userLimit(perMinute int) string {
	return fmt.Sprintf("domain: edge\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: minute\n      requests_per_unit: %d\n", perMinute)
}

func shouldRateLimit(t *testing.T, c rlspb.RateLimitServiceClient, d *rlv3.RateLimitDescriptor) *rlspb.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{d}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func user(name string) *rlv3.RateLimitDescriptor {
	return &rlv3.RateLimitDescriptor{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "user", Value: name}}}
}

// The built binary serves Envoy's RateLimitService from a config file to a
// client generated from Envoy's protos, reloads the file on SIGHUP keeping
// its buckets, refuses a bad one keeping the old limits, answers gRPC
// health, and leaves on SIGTERM.
func TestEnvoyRateLimitServiceAsBuilt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	writeFile(t, path, userLimit(3))
	p := start(t, build(t), "-addr", "127.0.0.1:0", "-config", path, "-config-poll", "1h")
	conn := dial(t, p.grpc)
	h, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health: %v %v", h, err)
	}
	c := rlspb.NewRateLimitServiceClient(conn)
	var codes []rlspb.RateLimitResponse_Code
	for range 4 {
		codes = append(codes, shouldRateLimit(t, c, user("ann")).OverallCode)
	}
	if want := []rlspb.RateLimitResponse_Code{rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OVER_LIMIT}; fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Fatalf("3 a minute: %v", codes)
	}
	// A check-only descriptor reads the limit without spending.
	peek := user("ann")
	peek.HitsAddend = wrapperspb.UInt64(0)
	limitNow := func() (uint32, uint32) {
		st := shouldRateLimit(t, c, peek).Statuses[0]
		return st.CurrentLimit.GetRequestsPerUnit(), st.LimitRemaining
	}
	writeFile(t, path, userLimit(6))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if limit, _ := limitNow(); limit == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SIGHUP did not reload:\n%s", p.logs.String())
		}
	}
	// A new rate is decided from full buckets: 6 of 6 left.
	if _, left := limitNow(); left != 6 {
		t.Fatalf("after the reload to a new rate %d left, want 6", left)
	}
	spend := user("ann")
	spend.HitsAddend = wrapperspb.UInt64(2)
	shouldRateLimit(t, c, spend)
	// A reload that keeps the rate (another rule beside it) keeps the
	// spent tokens: 4 left (5 if one came back meanwhile, at a token every
	// 10 s).
	writeFile(t, path, userLimit(6)+"  - key: tenant\n    rate_limit: {unit: hour, requests_per_unit: 9}\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	loaded := regexp.MustCompile(`config loaded.*rules=2`)
	for deadline := time.Now().Add(10 * time.Second); !loaded.MatchString(p.logs.String()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("SIGHUP did not reload:\n%s", p.logs.String())
		}
	}
	if _, left := limitNow(); left < 4 || left > 5 {
		t.Fatalf("after a reload that kept the rate %d left, want 4", left)
	}
	writeFile(t, path, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minutes, requests_per_unit: 1}\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	refused := regexp.MustCompile(`the new config is refused.*limits.yaml:4`)
	for deadline := time.Now().Add(10 * time.Second); !refused.MatchString(p.logs.String()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a bad file was not refused in the log:\n%s", p.logs.String())
		}
	}
	if limit, _ := limitNow(); limit != 6 {
		t.Fatalf("a refused file changed the limit to %d", limit)
	}
	if _, m := get(t, "http://"+p.http+"/metrics"); !strings.Contains(m, `gopherpace_rls_config_loads_total{result="refused"} 1`) {
		t.Fatalf("the refusal is not counted:\n%s", m)
	}
	p.stop(t)
}

// A config the server cannot load stops it at start, naming the line.
func TestABadConfigRefusesToStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	writeFile(t, path, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1}\n    descriptor: []\n")
	var out, errs strings.Builder
	code := run([]string{"serve", "-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-config", path}, func(string) string { return "" }, &out, &errs)
	if code != 1 || !strings.Contains(errs.String(), `limits.yaml:5: unknown key "descriptor"`) {
		t.Fatalf("exit %d, %q", code, errs.String())
	}
}

// Three replicas of the binary over real memberlist on loopback, asked
// round-robin at random (Poisson) times at 5× each limit, enforce each
// once across the cluster: the total within 2% of R·t+B. Each limit, one
// bucket or a bucket per value asked at every replica at once, shares its
// rate by each replica's offered load, so every replica's admit ratio is
// within 10% of the cluster's (before keyed buckets had shares, a hot
// value split 0.40–1.29).
func TestThreeReplicasEnforceOneEnvoyLimit(t *testing.T) {
	const (
		rate    = 100 // a second, for each limit
		offered = 5 * rate
		run     = 8 * time.Second
		// A run whose load generator fell further behind its schedule
		// than this (a starved machine) measures the generator, not the
		// cluster: it is made again on fresh buckets, up to attempts times.
		maxLate  = 250 * time.Millisecond
		attempts = 3
	)
	path := filepath.Join(t.TempDir(), "limits.yaml")
	writeFile(t, path, fmt.Sprintf(`domain: edge
descriptors:
  - key: tenant
    value: acme0
    rate_limit: {unit: second, requests_per_unit: %[1]d}
  - key: tenant
    value: acme1
    rate_limit: {unit: second, requests_per_unit: %[1]d}
  - key: tenant
    value: acme2
    rate_limit: {unit: second, requests_per_unit: %[1]d}
  - key: user
    rate_limit: {unit: second, requests_per_unit: %[1]d}
`, rate))
	bin := build(t)
	common := []string{"-addr", "127.0.0.1:0", "-config", path, "-bind", "127.0.0.1", "-port", "0"}
	a := start(t, bin, append(common, "-node", "a")...)
	if a.gossip == "" {
		t.Fatalf("replica a never said where it gossips:\n%s", a.logs.String())
	}
	replicas := []*proc{a,
		start(t, bin, append(common, "-node", "b", "-seeds", a.gossip)...),
		start(t, bin, append(common, "-node", "c", "-seeds", a.gossip)...)}
	heard := []*regexp.Regexp{ // the four rules of one rate: one limiter
		regexp.MustCompile(`gopherpace_cluster_peers\{limiter="rls 100/1s/100",state="heard"\} 3`),
	}
	for _, p := range replicas {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, m := get(t, "http://"+p.http+"/metrics")
			if !slices.ContainsFunc(heard, func(re *regexp.Regexp) bool { return !re.MatchString(m) }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the replicas never heard each other:\n%s", p.logs.String())
			}
		}
	}
	clients := make([]rlspb.RateLimitServiceClient, len(replicas))
	for i, p := range replicas {
		clients[i] = rlspb.NewRateLimitServiceClient(dial(t, p.grpc))
	}
	for attempt := range attempts {
		if measureThreeReplicas(t, clients, attempt, rate, offered, run, maxLate) {
			break
		}
		if attempt == attempts-1 {
			t.Fatalf("the load generator fell more than %v behind in each of %d runs", maxLate, attempts)
		}
	}
	for _, p := range replicas {
		p.stop(t)
	}
}

// measureThreeReplicas runs one measurement on attempt's fresh buckets and
// checks it; false means the load generator fell behind, so the run
// proves nothing.
func measureThreeReplicas(t *testing.T, clients []rlspb.RateLimitServiceClient, attempt int, rate int, offered float64, run, maxLate time.Duration) bool {
	t.Helper()
	n := strconv.Itoa(attempt)
	limits := []*rlv3.RateLimitDescriptor{
		{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "tenant", Value: "acme" + n}}},
		{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "user", Value: "hot" + n}}},
	}
	// One Poisson stream of arrivals per limit, dealt round-robin; each
	// replica's share is sent by its own goroutine, on schedule or as soon
	// as it can.
	type arrival struct {
		at    time.Duration
		limit int
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	schedules := make([][]arrival, len(clients))
	for li := range limits {
		at := time.Duration(0)
		for i := 0; ; i++ {
			at += time.Duration(rng.ExpFloat64() / offered * float64(time.Second))
			if at >= run {
				break
			}
			schedules[i%len(clients)] = append(schedules[i%len(clients)], arrival{at, li})
		}
	}
	for _, s := range schedules {
		slices.SortFunc(s, func(x, y arrival) int { return int(x.at - y.at) })
	}
	var asked, admitted [2][3]int
	var last, late [3]time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range clients {
		wg.Go(func() {
			// Each decision is asked on its own goroutine at its time, so
			// that a slow answer (a loaded machine under -race) delays no
			// later arrival: late measures only this scheduler's lag.
			var calls sync.WaitGroup
			defer calls.Wait()
			for _, a := range schedules[i] {
				if wait := a.at - time.Since(begin); wait > 0 {
					time.Sleep(wait)
				} else {
					late[i] = max(late[i], -wait)
				}
				calls.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					resp, err := clients[i].ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: limits[a.limit : a.limit+1]})
					cancel()
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Errorf("replica %d: %v", i, err)
						return
					}
					asked[a.limit][i]++
					if resp.OverallCode == rlspb.RateLimitResponse_OK {
						admitted[a.limit][i]++
					}
					last[i] = max(last[i], time.Since(begin))
				})
			}
		})
	}
	wg.Wait()
	if behind := max(late[0], late[1], late[2]); behind > maxLate {
		t.Logf("attempt %d: the load generator fell %v behind its schedule; again", attempt, behind)
		return false
	}
	elapsed := max(last[0], last[1], last[2])
	ideal := float64(rate)*elapsed.Seconds() + float64(rate)
	for li, name := range []string{"one bucket (tenant=acme)", "a bucket per value (user=hot)"} {
		total, requests := 0, 0
		for i := range clients {
			total += admitted[li][i]
			requests += asked[li][i]
		}
		cluster := float64(total) / float64(requests)
		worst := 1.0
		for i := range clients {
			r := float64(admitted[li][i]) / float64(asked[li][i]) / cluster
			if math.Abs(r-1) > math.Abs(worst-1) {
				worst = r
			}
		}
		t.Logf("%s: admitted %d of %d in %v, %.4f of R·t+B; per replica %v of %v; worst replica's ratio %.2f of the cluster's",
			name, total, requests, elapsed, float64(total)/ideal, admitted[li], asked[li], worst)
		if math.Abs(float64(total)-ideal) > 0.02*ideal {
			t.Errorf("%s: admitted %d, want within 2%% of %.0f", name, total, ideal)
		}
		if math.Abs(worst-1) > 0.1 {
			t.Errorf("%s: a replica admitted %.2f of the cluster's ratio", name, worst)
		}
	}
	return true
}

// On SIGTERM with -drain, the server goes on answering while /readyz says
// 503 and gRPC health NOT_SERVING, so callers move away before it stops
// accepting; then it exits cleanly.
func TestSIGTERMDrainsFirst(t *testing.T) {
	p := start(t, build(t), "-addr", "127.0.0.1:0", "-drain", "2s")
	health := healthpb.NewHealthClient(dial(t, p.grpc))
	if code, _ := get(t, "http://"+p.http+"/readyz"); code != 200 {
		t.Fatalf("/readyz %d before SIGTERM", code)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if code, _ := get(t, "http://"+p.http+"/readyz"); code == 503 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz never said 503 after SIGTERM")
		}
	}
	if code, _ := get(t, "http://"+p.http+"/allow?key=k"); code != 200 {
		t.Fatalf("/allow answered %d while draining", code)
	}
	h, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("gRPC health while draining: %v %v", h, err)
	}
	p.waitExit(t)
}
