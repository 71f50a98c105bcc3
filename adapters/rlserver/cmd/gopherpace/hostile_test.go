package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// An attack on a listener: connections opened from several loopback
// addresses (127.0.0.x, each a client of its own), each begun by open and
// then held; one the server closes is opened again, so that the attack
// keeps up its pressure, until stop. Every count is bounded: at most
// reopens connections in all beyond the first ones.
type attack struct {
	addr    string
	froms   []string
	perFrom int
	open    func(c net.Conn) error // the attack's first bytes on a new connection
	keep    func(c net.Conn) error // called every keepEvery while it holds c; nil: nothing
	reopens int64

	opened, closedByServer atomic.Int64
	stop                   chan struct{}
	wg                     sync.WaitGroup
}

const keepEvery = 2 * time.Second

func (a *attack) start(t *testing.T) {
	t.Helper()
	a.stop = make(chan struct{})
	budget := &atomic.Int64{}
	budget.Store(a.reopens)
	for _, from := range a.froms {
		for range a.perFrom {
			a.wg.Go(func() { a.hold(from, budget, true) })
		}
	}
	t.Cleanup(a.end)
}

func (a *attack) end() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	a.wg.Wait()
}

// hold opens one connection from from and holds it; when the server
// closes it, it opens another while the budget lasts.
func (a *attack) hold(from string, budget *atomic.Int64, first bool) {
	for first || budget.Add(-1) >= 0 {
		first = false
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", a.addr)
		if err != nil {
			select {
			case <-a.stop:
				return
			case <-time.After(50 * time.Millisecond):
				continue
			}
		}
		a.opened.Add(1)
		closed := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, c); close(closed) }()
		if a.open(c) == nil {
			tick := time.NewTicker(keepEvery)
		held:
			for {
				select {
				case <-a.stop:
					tick.Stop()
					c.Close()
					<-closed
					return
				case <-closed:
					a.closedByServer.Add(1)
					break held
				case <-tick.C:
					if a.keep != nil && a.keep(c) != nil {
						break held
					}
				}
			}
			tick.Stop()
		}
		c.Close()
		<-closed
	}
}

// silentStreams begins a gRPC connection as a client does and opens a
// ShouldRateLimit stream that never sends its message; keep opens another
// such stream, so that the connection always carries a call.
type silentStreams struct {
	mu     sync.Mutex
	next   map[net.Conn]uint32
	header []byte
}

func newSilentStreams(authority string) *silentStreams {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":authority", authority},
		{":path", rlspb.RateLimitService_ShouldRateLimit_FullMethodName},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return &silentStreams{next: map[net.Conn]uint32{}, header: b.Bytes()}
}

func (s *silentStreams) open(c net.Conn) error {
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return err
	}
	if err := http2.NewFramer(c, nil).WriteSettings(); err != nil {
		return err
	}
	return s.keep(c)
}

func (s *silentStreams) keep(c net.Conn) error {
	s.mu.Lock()
	id := s.next[c] + 2 // client streams are odd: 1, 3, 5...
	if id == 2 {
		id = 1
	}
	s.next[c] = id
	s.mu.Unlock()
	return http2.NewFramer(c, nil).WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: s.header, EndHeaders: true})
}

// idleKeepAlive sends one request and leaves the connection idle.
func idleKeepAlive(c net.Conn) error {
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return err
	}
	return nil
}

// metric reads one sample of the server's /metrics.
func metric(t *testing.T, httpAddr, name string) float64 {
	t.Helper()
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

// The attacks that held the ports of the service, against the built
// binary with its default caps: 1,030 connections from five addresses,
// each holding a ShouldRateLimit call that never sends its message (and
// opening another every 2 s), and 1,100 keep-alive connections that each
// sent one request and sit idle. While they run, a fresh client (a new
// connection from another address) is answered within 1 s, on each port,
// every time it asks; the attackers' connections are what gives way, and
// the server says so once in its log and in its metrics.
func TestNoClientCanHoldThePorts(t *testing.T) {
	bin := build(t)
	p := start(t, bin, "-addr", "127.0.0.1:0", "-config", writeConfig(t))
	froms := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"}
	streams := newSilentStreams(p.grpc)
	grpcAttack := &attack{addr: p.grpc, froms: froms, perFrom: 206, open: streams.open, keep: streams.keep, reopens: 3000}
	httpAttack := &attack{addr: p.http, froms: froms, perFrom: 220, open: idleKeepAlive, reopens: 3000}
	grpcAttack.start(t)
	httpAttack.start(t)
	deadline := time.Now().Add(30 * time.Second)
	for grpcAttack.opened.Load() < 1030 || httpAttack.opened.Load() < 1100 {
		if time.Now().After(deadline) {
			t.Fatalf("the attack opened %d gRPC and %d HTTP connections in 30 s", grpcAttack.opened.Load(), httpAttack.opened.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("attack under way: %d gRPC and %d HTTP connections opened", grpcAttack.opened.Load(), httpAttack.opened.Load())
	fresh := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}
	// Ask seven times over about 8 s, past the silent calls' timeout, each
	// time on a new connection, as a client that just started would.
	for i := range 7 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		start := time.Now()
		conn, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return fresh.DialContext(ctx, "tcp", addr) }))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := rlspb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlspb.RateLimitRequest{
			Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{user(fmt.Sprint("fresh-", i))}})
		cancel()
		conn.Close()
		if err != nil || resp.OverallCode != rlspb.RateLimitResponse_OK {
			t.Fatalf("ask %d: a fresh gRPC client failed during the attack after %v: %v %v", i, time.Since(start), resp, err)
		}
		grpcTook := time.Since(start)
		start = time.Now()
		client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: fresh.DialContext, DisableKeepAlives: true}}
		r, err := client.Get("http://" + p.http + "/allow?key=fresh")
		if err != nil {
			t.Fatalf("ask %d: a fresh HTTP client failed during the attack after %v: %v", i, time.Since(start), err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Fatalf("ask %d: /allow answered %d", i, r.StatusCode)
		}
		t.Logf("ask %d: gRPC answered in %v, HTTP in %v", i, grpcTook, time.Since(start))
	}
	for _, l := range []string{"grpc", "http"} {
		open := metric(t, p.http, `gopherpace_connections_open{listener="`+l+`"}`)
		reclaimed := metric(t, p.http, `gopherpace_connections_reclaimed_total{listener="`+l+`"}`)
		t.Logf("%s: %v open, %v reclaimed", l, open, reclaimed)
		if open > 1024 || reclaimed == 0 {
			t.Errorf("%s listener: %v open (cap 1,024), %v reclaimed (want some)", l, open, reclaimed)
		}
	}
	// The calls on connections that lasted were ended for their silence.
	if silent := metric(t, p.http, "gopherpace_grpc_silent_calls_total"); silent == 0 {
		t.Error("no silent call was ended")
	}
	grpcAttack.end()
	httpAttack.end()
	logs := p.logs.String()
	warns := regexp.MustCompile(`connection cap reached.*listener=(http|grpc)`).FindAllString(logs, -1)
	if len(warns) == 0 || len(warns) > 4 {
		t.Errorf("%d WARN records of the caps, want one or two per listener:\n%s", len(warns), logs)
	}
	if n := strings.Count(logs, "sent no request message"); n != 1 {
		t.Errorf("%d records of silent calls, want 1", n)
	}
	p.stop(t)
}

func writeConfig(t *testing.T) string {
	t.Helper()
	path := t.TempDir() + "/limits.yaml"
	writeFile(t, path, userLimit(60))
	return path
}

// A replica started with another gossip key than its cluster's says so at
// ERROR and stays unready, over HTTP and gRPC health alike, instead of
// serving the whole limit alone; the cluster's own replica is unaffected.
func TestAReplicaWithAnotherKeyIsLoudAndNotReady(t *testing.T) {
	bin := build(t)
	common := []string{"-addr", "127.0.0.1:0", "-bind", "127.0.0.1", "-port", "0"}
	a := start(t, bin, append(common, "-node", "a", "-secret-key", "MDEyMzQ1Njc4OWFiY2RlZg==")...)
	b := start(t, bin, append(common, "-node", "b", "-secret-key", "ZmVkY2JhOTg3NjU0MzIxMA==", "-seeds", a.gossip)...)
	if code, body := get(t, "http://"+b.http+"/readyz"); code != 503 || !strings.Contains(body, "refused") {
		t.Fatalf("b's /readyz: %d %q, want 503 naming the refusal", code, body)
	}
	if code, _ := get(t, "http://"+a.http+"/readyz"); code != 200 {
		t.Fatalf("a's /readyz: %d", code)
	}
	health := func(addr string) healthpb.HealthCheckResponse_ServingStatus {
		conn := dial(t, addr)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: rlspb.RateLimitService_ServiceDesc.ServiceName})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status
	}
	if st := health(b.grpc); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("b's gRPC health: %v, want NOT_SERVING", st)
	}
	if st := health(a.grpc); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("a's gRPC health: %v", st)
	}
	if !regexp.MustCompile(`level=ERROR msg="the cluster refuses this node`).MatchString(b.logs.String()) {
		t.Fatalf("b did not say why at ERROR:\n%s", b.logs.String())
	}
	a.stop(t)
	b.stop(t)
}
