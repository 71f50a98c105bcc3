// Command rlsbench measures Envoy's RateLimitService as two servers
// answer it, side by side in one run on one machine, with one client:
// envoyproxy/ratelimit (built from its module, backed by a real
// redis-server) and gopherpace serve, given the same limits file.
//
//	make bench-rls          # from the repository root
//	go run . -duration 10s  # from bench/rlsbench
//
// Three parts (-parts), each side by side:
//   - throughput: for each server, decisions a second with 32 concurrent
//     callers on one key and on 10,000 keys (closed loop: each caller asks
//     again as soon as it is answered), and latency percentiles at an
//     offered 1,500 a second (open loop: Poisson arrivals, latency counted
//     from the scheduled time, so a stalled server is charged for the
//     queue it causes); then ours answering the seed's GET /allow;
//   - accuracy: three replicas of each behind round-robin enforcing one
//     limit at 5× its rate for 20 s (accuracy.go);
//   - memory: resident memory after a million distinct descriptor values
//     (memory.go).
//
// Every decision is a real gRPC call over loopback from a client generated
// from Envoy's protos.
package main

import (
	"bytes"
	"context"
	"errors"
	"expvar"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The limits every server loads: tenant, one a value, high enough that
// the closed loop measures deciding rather than denying; shared=acme, one
// limit that three replicas enforce together (the accuracy part); user,
// one a value at 10 an hour, so that a million values stay a million live
// buckets for the memory part.
const limits = `domain: bench
descriptors:
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: shared
    value: acme
    rate_limit: {unit: second, requests_per_unit: 200}
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 10}
`

// The accuracy part's limit: R = B = 200, offered 5×R.
const (
	sharedRate    = 200
	sharedOffered = 5 * sharedRate
)

func main() {
	duration := flag.Duration("duration", 10*time.Second, "how long each measurement runs")
	callers := flag.Int("callers", 32, "concurrent callers in the closed loop")
	offered := flag.Float64("offered", 1500, "decisions a second offered in the open loop")
	noop := flag.String("serve-noop", "", "serve a RateLimitService that answers OK without deciding, on this address (the bench runs itself so, for gRPC's own ceiling)")
	noopHTTP := flag.String("serve-noop-http", "", "with -serve-noop, also answer GET /allow on this address without deciding (HTTP's ceiling)")
	parts := flag.String("parts", "throughput,accuracy,memory", "what to measure, comma-separated: throughput (and /allow latency), accuracy (three replicas of each behind round-robin), memory (a million descriptor values)")
	accuracyFor := flag.Duration("accuracy-duration", 20*time.Second, "how long the accuracy part offers load")
	values := flag.Int("values", 1_000_000, "distinct descriptor values the memory part sends")
	flag.Parse()
	if *noop != "" {
		if err := serveNoop(*noop, *noopHTTP); err != nil {
			fmt.Fprintln(os.Stderr, "rlsbench:", err)
			os.Exit(1)
		}
		return
	}
	want := map[string]bool{}
	for _, p := range strings.Split(*parts, ",") {
		want[strings.TrimSpace(p)] = true
	}
	if err := run(want, *duration, *callers, *offered, *accuracyFor, *values); err != nil {
		fmt.Fprintln(os.Stderr, "rlsbench:", err)
		os.Exit(1)
	}
}

type server struct {
	name    string
	addr    string
	pids    []int        // its processes, for their CPU time
	mallocs mallocReader // its Go process's heap allocations so far
}

func run(parts map[string]bool, duration time.Duration, callers int, offered float64, accuracyFor time.Duration, values int) error {
	dir, err := os.MkdirTemp("", "rlsbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// envoyproxy/ratelimit reads RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml.
	confDir := filepath.Join(dir, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(confDir, "bench.yaml"), []byte(limits), 0o644); err != nil {
		return err
	}
	fmt.Println("building envoyproxy/ratelimit and gopherpace")
	theirs, ours := filepath.Join(dir, "ratelimit"), filepath.Join(dir, "gopherpace")
	if out, err := exec.Command("go", "build", "-o", theirs, "github.com/envoyproxy/ratelimit/src/service_cmd").CombinedOutput(); err != nil {
		return fmt.Errorf("building envoyproxy/ratelimit: %v\n%s", err, out)
	}
	if out, err := exec.Command("go", "build", "-o", ours, "github.com/pedreviljoen/gopherpace/adapters/rlserver/cmd/gopherpace").CombinedOutput(); err != nil {
		return fmt.Errorf("building gopherpace: %v\n%s", err, out)
	}
	redisPort, err := freePort()
	if err != nil {
		return err
	}
	redis := exec.Command("redis-server", "--port", strconv.Itoa(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := redis.Start(); err != nil {
		return fmt.Errorf("redis-server (make bench-rls installs it): %w", err)
	}
	defer func() { _ = redis.Process.Kill(); _ = redis.Wait() }()
	// envoyproxy/ratelimit exits if Redis does not answer at its start.
	if err := waitListening("127.0.0.1:"+strconv.Itoa(redisPort), 30*time.Second); err != nil {
		return fmt.Errorf("redis-server: %w", err)
	}

	env := benchEnv{dir: dir, confDir: confDir, theirs: theirs, ours: ours, redisPort: redisPort, redis: redis.Process.Pid}
	if parts["throughput"] {
		if err := throughput(env, duration, callers, offered); err != nil {
			return err
		}
	}
	if parts["accuracy"] {
		if err := accuracy(env, accuracyFor); err != nil {
			return err
		}
	}
	if parts["memory"] {
		if err := memory(env, callers, values); err != nil {
			return err
		}
	}
	return nil
}

// benchEnv is what every part needs: the built servers, their limits and
// the Redis that envoyproxy/ratelimit counts in.
type benchEnv struct {
	dir, confDir, theirs, ours string
	redisPort, redis           int // redis-server's port and process ID
}

// theirsCmd is one envoyproxy/ratelimit process on the shared Redis,
// serving gRPC on grpcPort and its debug endpoints on debugPort.
func (b benchEnv) theirsCmd(grpcPort int) (cmd *exec.Cmd, debugPort int, err error) {
	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, 0, err
		}
	}
	rl := exec.Command(b.theirs)
	rl.Env = append(os.Environ(), "USE_STATSD=false", "LOG_LEVEL=ERROR", "BACKEND_TYPE=redis",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=127.0.0.1:"+strconv.Itoa(b.redisPort),
		"RUNTIME_ROOT="+filepath.Join(b.dir, "runtime"), "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"HOST=127.0.0.1", "PORT="+strconv.Itoa(ports[0]), "GRPC_HOST=127.0.0.1", "GRPC_PORT="+strconv.Itoa(grpcPort),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+strconv.Itoa(ports[1]))
	return rl, ports[1], nil
}

// oursCmd is one gopherpace serve on the same limits, with args besides.
func (b benchEnv) oursCmd(httpPort, grpcPort int, args ...string) *exec.Cmd {
	return exec.Command(b.ours, append([]string{"serve", "-addr", "127.0.0.1:" + strconv.Itoa(httpPort),
		"-grpc-addr", "127.0.0.1:" + strconv.Itoa(grpcPort), "-config", filepath.Join(b.confDir, "bench.yaml")}, args...)...)
}

// startAll starts cmds, each listening on its addr, and returns a stop for
// all of them.
func startAll(names, addrs []string, cmds []*exec.Cmd) (stop func(), err error) {
	var started []*exec.Cmd
	stop = func() {
		for _, c := range started {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	for i, cmd := range cmds {
		var logs bytes.Buffer
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			stop()
			return nil, err
		}
		started = append(started, cmd)
		if err := waitListening(addrs[i], 30*time.Second); err != nil {
			stop()
			return nil, fmt.Errorf("%s: %w\n%s", names[i], err, logs.String())
		}
	}
	return stop, nil
}

// throughput is decisions a second closed loop, latency open loop, for
// each server, and the /allow latency of ours.
func throughput(b benchEnv, duration time.Duration, callers int, offered float64) error {
	ports := make([]int, 7)
	for i := range ports {
		var err error
		if ports[i], err = freePort(); err != nil {
			return err
		}
	}
	rl, debugPort, err := b.theirsCmd(ports[1])
	if err != nil {
		return err
	}
	gp := b.oursCmd(ports[3], ports[4])
	self, err := os.Executable()
	if err != nil {
		return err
	}
	noop := exec.Command(self, "-serve-noop", "127.0.0.1:"+strconv.Itoa(ports[5]), "-serve-noop-http", "127.0.0.1:"+strconv.Itoa(ports[6]))
	servers := []server{
		{name: "envoyproxy/ratelimit + Redis", addr: "127.0.0.1:" + strconv.Itoa(ports[1]),
			mallocs: mallocsFromStatsLines("http://127.0.0.1:" + strconv.Itoa(debugPort) + "/stats")},
		{name: "gopherpace serve", addr: "127.0.0.1:" + strconv.Itoa(ports[4]),
			mallocs: mallocsFromMetrics("http://127.0.0.1:" + strconv.Itoa(ports[3]) + "/metrics")},
		{name: "a server that answers OK without deciding (gRPC's ceiling here)", addr: "127.0.0.1:" + strconv.Itoa(ports[5]),
			mallocs: mallocsFromExpvar("http://127.0.0.1:" + strconv.Itoa(ports[6]) + "/debug/vars")},
	}
	stop, err := startAll([]string{servers[0].name, servers[1].name, servers[2].name},
		[]string{servers[0].addr, servers[1].addr, servers[2].addr}, []*exec.Cmd{rl, gp, noop})
	if err != nil {
		return err
	}
	defer stop()
	servers[0].pids = []int{rl.Process.Pid, b.redis}
	servers[1].pids = []int{gp.Process.Pid}
	servers[2].pids = []int{noop.Process.Pid}
	type cost struct {
		decisions float64
		cpu       []time.Duration
		atOffered time.Duration // CPU time over the open loop
		answered  float64       // decisions answered in the open loop
		mallocs   uint64        // heap objects the Go server allocated over both closed loops
	}
	costs := make([]cost, len(servers))
	fmt.Printf("\n%d callers closed loop and %.0f/s open loop, %v each, on %d cores\n\n", callers, offered, duration, numCPU())
	fmt.Println("| server | decisions/s, 1 key | decisions/s, 10,000 keys | p50 at offered | p99 at offered | errors |")
	fmt.Println("|---|---|---|---|---|---|")
	for i, s := range servers {
		conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		c := rlspb.NewRateLimitServiceClient(conn)
		if _, err := ask(c, "warm"); err != nil {
			conn.Close()
			return fmt.Errorf("%s: %w", s.name, err)
		}
		mallocsBefore, err := s.mallocs()
		if err != nil {
			conn.Close()
			return fmt.Errorf("%s: %w", s.name, err)
		}
		meter, err := startCPU(s.pids...)
		if err != nil {
			conn.Close()
			return err
		}
		one, e1 := closedLoop(c, callers, duration, 1)
		many, e2 := closedLoop(c, callers, duration, 10000)
		used, err := meter.used()
		if err != nil {
			conn.Close()
			return err
		}
		mallocsAfter, err := s.mallocs()
		if err != nil {
			conn.Close()
			return fmt.Errorf("%s: %w", s.name, err)
		}
		costs[i] = cost{decisions: (one + many) * duration.Seconds(), cpu: used, mallocs: mallocsAfter - mallocsBefore}
		if meter, err = startCPU(s.pids...); err != nil {
			conn.Close()
			return err
		}
		p50, p99, answered, e3 := openLoop(c, offered, duration)
		if used, err = meter.used(); err != nil {
			conn.Close()
			return err
		}
		costs[i].atOffered, costs[i].answered = sum(used), float64(answered)
		conn.Close()
		fmt.Printf("| %s | %.0f | %.0f | %.2f ms | %.2f ms | %d |\n", s.name, one, many, ms(p50), ms(p99), e1+e2+e3)
	}
	// CPU time per decision over both closed loops, from /proc, every
	// process of each side: envoyproxy/ratelimit's includes its Redis.
	fmt.Printf("\nCPU time per decision, both closed loops and the open loop at %.0f/s (/proc, %v resolution)\n\n", offered, clockTick)
	fmt.Println("| server | decisions | CPU time | per decision | against envoyproxy/ratelimit + Redis | per decision at the open loop's rate | against envoyproxy/ratelimit + Redis | allocations per decision (the Go server's heap objects) |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	atOffered := make([]float64, len(servers))
	for i := range servers {
		if costs[i].answered > 0 {
			atOffered[i] = float64(costs[i].atOffered.Microseconds()) / costs[i].answered
		}
	}
	perDecision := make([]float64, len(servers))
	for i, s := range servers {
		var total time.Duration
		var parts []string
		for j, u := range costs[i].cpu {
			total += u
			parts = append(parts, fmt.Sprintf("pid %d %.2fs", s.pids[j], u.Seconds()))
		}
		if costs[i].decisions > 0 {
			perDecision[i] = float64(total.Microseconds()) / costs[i].decisions
		}
		ratio, ratioOffered := "—", "—"
		if perDecision[0] > 0 && i > 0 {
			ratio = fmt.Sprintf("%.2f×", perDecision[i]/perDecision[0])
		}
		if atOffered[0] > 0 && i > 0 {
			ratioOffered = fmt.Sprintf("%.2f×", atOffered[i]/atOffered[0])
		}
		allocs := 0.0
		if costs[i].decisions > 0 {
			allocs = float64(costs[i].mallocs) / costs[i].decisions
		}
		fmt.Printf("| %s | %.0f | %.2f s (%s) | %.1f µs | %s | %.1f µs | %s | %.0f |\n", s.name, costs[i].decisions, total.Seconds(), strings.Join(parts, ", "), perDecision[i], ratio, atOffered[i], ratioOffered, allocs)
	}
	// The seed's HTTP API on the same server: its own published figures
	// are p50 0.6 ms and p99 11 ms on loopback. Beside it, the same
	// request answered by a handler that decides nothing: the floor that
	// Go's HTTP server and client, and this generator, set on this machine.
	fmt.Printf("\nHTTP GET /allow, open loop (Poisson) and one caller back to back, %v each\n\n", duration)
	fmt.Println("| server | load | p50 | p99 | errors |")
	fmt.Println("|---|---|---|---|---|")
	// At most 256 connections, as a caller's pool holds: a generator that
	// opens one per request in flight turned one stall of the shared
	// machine into thousands of connections queued behind the server's
	// cap of 1,024, and most of a run timed out (the do-nothing server
	// below is capped alike).
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}, Timeout: 5 * time.Second}
	for _, target := range []struct{ name, url string }{
		{"gopherpace serve", "http://127.0.0.1:" + strconv.Itoa(ports[3]) + "/allow?key=t"},
		{"a handler that answers without deciding", "http://127.0.0.1:" + strconv.Itoa(ports[6]) + "/allow?key=t"},
	} {
		get := func(i int) error {
			resp, err := client.Get(target.url + strconv.Itoa(i%10000))
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.Body.Close()
		}
		for _, rate := range []float64{1000, 10000} {
			p50, p99, errs := openLoopWith(rate, duration, get)
			fmt.Printf("| %s | %.0f/s offered | %.2f ms | %.2f ms | %d |\n", target.name, rate, ms(p50), ms(p99), errs)
		}
		// One caller, one request at a time: the round trip with no queue
		// and no generator's timers in it.
		var lat []time.Duration
		failed := 0
		for i, end := 0, time.Now().Add(duration); time.Now().Before(end); i++ {
			start := time.Now()
			if err := get(i); err != nil {
				failed++
				continue
			}
			lat = append(lat, time.Since(start))
		}
		if len(lat) == 0 {
			return fmt.Errorf("%s: no request answered", target.name)
		}
		slices.Sort(lat)
		fmt.Printf("| %s | one caller, back to back (%d requests) | %.3f ms | %.3f ms | %d |\n", target.name, len(lat), ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), failed)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func numCPU() int { return runtime.GOMAXPROCS(0) }

func ask(c rlspb.RateLimitServiceClient, tenant string) (*rlspb.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "bench", Descriptors: []*rlv3.RateLimitDescriptor{
		{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "tenant", Value: tenant}}}}})
}

// closedLoop is decisions a second with callers asking back to back, each
// for a random one of keys.
func closedLoop(c rlspb.RateLimitServiceClient, callers int, d time.Duration, keys int) (float64, int64) {
	var done, errs atomic.Int64
	names := make([]string, keys)
	for i := range names {
		names[i] = "t" + strconv.Itoa(i)
	}
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if _, err := ask(c, names[rand.IntN(keys)]); err != nil {
					errs.Add(1)
					continue
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(done.Load()) / d.Seconds(), errs.Load()
}

// openLoop offers rate decisions a second as Poisson arrivals and returns
// the median and 99th percentile latency from each arrival's scheduled
// time, and how many were answered.
func openLoop(c rlspb.RateLimitServiceClient, rate float64, d time.Duration) (p50, p99 time.Duration, answered, errs int64) {
	var n atomic.Int64
	p50, p99, errs = openLoopWith(rate, d, func(i int) error {
		_, err := ask(c, "t"+strconv.Itoa(i%10000))
		if err == nil {
			n.Add(1)
		}
		return err
	})
	return p50, p99, n.Load(), errs
}

// openLoopWith is openLoop for any call.
func openLoopWith(rate float64, d time.Duration, call func(i int) error) (p50, p99 time.Duration, errs int64) {
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	var failed atomic.Int64
	begin := time.Now()
	at := time.Duration(0)
	for i := 0; ; i++ {
		at += time.Duration(rand.ExpFloat64() / rate * float64(time.Second))
		if at >= d {
			break
		}
		if wait := at - time.Since(begin); wait > 0 {
			time.Sleep(wait)
		}
		due := begin.Add(at)
		wg.Go(func() {
			if err := call(i); err != nil {
				failed.Add(1)
				return
			}
			l := time.Since(due)
			mu.Lock()
			lat = append(lat, l)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(lat) == 0 {
		return 0, 0, failed.Load()
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100], failed.Load()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitListening(addr string, within time.Duration) error {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
	}
	return errors.New("never listened on " + addr)
}

type noopServer struct {
	rlspb.UnimplementedRateLimitServiceServer
}

func (noopServer) ShouldRateLimit(_ context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	resp := &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK}
	for range req.Descriptors {
		resp.Statuses = append(resp.Statuses, &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK})
	}
	return resp, nil
}

// serveNoop is the ceiling: the same gRPC server and messages, no decision.
func serveNoop(addr, httpAddr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if httpAddr != "" {
		hl, err := net.Listen("tcp", httpAddr)
		if err != nil {
			return err
		}
		// The listener gopherpace serve has: the same cap and timeouts.
		mux := http.NewServeMux()
		mux.HandleFunc("/allow", allowNoop)
		mux.Handle("/debug/vars", expvar.Handler()) // its allocations, for the CPU table
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 16 << 10}
		go func() { _ = srv.Serve(netutil.LimitListener(hl, 1024)) }()
	}
	g := grpc.NewServer()
	rlspb.RegisterRateLimitServiceServer(g, noopServer{})
	return g.Serve(ln)
}

// allowNoop answers the seed's GET /allow as gopherpace serve does for an
// admitted request, reading the same query and writing the same headers and
// body, without deciding anything.
func allowNoop(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("key") == "" {
		http.Error(w, "missing key", http.StatusBadRequest)
		return
	}
	if n := q.Get("n"); n != "" {
		if _, err := strconv.Atoi(n); err != nil {
			http.Error(w, "bad n", http.StatusBadRequest)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-RateLimit-Limit", "1000000")
	h.Set("X-RateLimit-Remaining", "999999")
	_, _ = io.WriteString(w, `{"allowed":true,"remaining":999999,"limit":1000000,"rate":1000000}`+"\n")
}
