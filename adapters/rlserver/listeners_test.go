package rlserver

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// runServer runs the whole server (Run) on loopback with its defaults and
// any flags given, and returns its HTTP and gRPC addresses; it stops at the
// end of the test.
func runServer(t *testing.T, flags ...string) (httpAddr, grpcAddr string) {
	t.Helper()
	c, err := ParseFlags(append([]string{"-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, flags...), func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, quiet, func(h, g string) { addrs <- [2]string{h, g} }, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case a := <-addrs:
		return a[0], a[1]
	case err := <-done:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not start")
	}
	return "", ""
}

// closedAfter reads conn until the server closes it and returns how long
// that took (at most limit).
func closedAfter(conn net.Conn, limit time.Duration) time.Duration {
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(limit))
	_, _ = io.Copy(io.Discard, conn)
	return time.Since(start)
}

// A client that opens a connection and stops halfway (a header never
// finished over HTTP, no handshake over gRPC) holds it only until the
// listener's timeout, 5 s on each.
func TestHalfOpenConnectionsAreClosed(t *testing.T) {
	httpAddr, grpcAddr := runServer(t)
	h, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := io.WriteString(h, "GET /allow?key=k HTTP/1.1\r\nHost: x\r\n"); err != nil { // no blank line
		t.Fatal(err)
	}
	g, err := net.Dial("tcp", grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var wg sync.WaitGroup
	var tookHTTP, tookGRPC time.Duration
	wg.Go(func() { tookHTTP = closedAfter(h, 15*time.Second) })
	wg.Go(func() { tookGRPC = closedAfter(g, 15*time.Second) })
	wg.Wait()
	t.Logf("closed after %v (HTTP, half a header) and %v (gRPC, no handshake)", tookHTTP, tookGRPC)
	for _, c := range []struct {
		name          string
		took, timeout time.Duration
	}{{"HTTP", tookHTTP, readHeaderTimeout}, {"gRPC", tookGRPC, connectTimeout}} {
		if c.took < c.timeout-time.Second || c.took > c.timeout+5*time.Second {
			t.Errorf("%s: a half-open connection was closed after %v, want about %v", c.name, c.took, c.timeout)
		}
	}
}

// A call that opens its stream and never sends its message is ended
// after firstMessageTimeout, and the connection it held goes back to
// idle; a call that sent its message is not (a health Watch stays open
// past the timeout).
func TestSilentCallsAreEnded(t *testing.T) {
	_, grpcAddr := runServer(t)
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	silent, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, rlspb.RateLimitService_ShouldRateLimit_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	watch, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var m healthpb.HealthCheckResponse // any message: none comes
	err = silent.RecvMsg(&m)
	took := time.Since(start)
	if status.Code(err) != codes.Canceled || took < firstMessageTimeout-time.Second || took > firstMessageTimeout+5*time.Second {
		t.Fatalf("a silent call ended after %v with %v, want Canceled after about %v", took, err, firstMessageTimeout)
	}
	// The Watch, which sent its message, is still open: it answers when
	// the status changes, not with an error.
	got := make(chan error, 1)
	go func() { _, err := watch.Recv(); got <- err }()
	select {
	case err := <-got:
		t.Fatalf("the health Watch ended after the first-message timeout: %v", err)
	case <-time.After(time.Second):
	}
}

// A flood of calls beyond maxInFlight is answered ResourceExhausted at
// once, without queueing, and calls pass again as soon as some finish.
func TestTooManyCallsAreRefusedAtOnce(t *testing.T) {
	const n = 3
	bound := unaryCalls(n)
	release := make(chan struct{})
	var started, wg sync.WaitGroup
	started.Add(n)
	blocked := func(context.Context, any) (any, error) { started.Done(); <-release; return "done", nil }
	for range n {
		wg.Go(func() {
			if _, err := bound(context.Background(), nil, &grpc.UnaryServerInfo{}, blocked); err != nil {
				t.Error(err)
			}
		})
	}
	started.Wait()
	start := time.Now()
	_, err := bound(context.Background(), nil, &grpc.UnaryServerInfo{}, func(context.Context, any) (any, error) { return "ran", nil })
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("call %d of %d at once: %v, want ResourceExhausted", n+1, n, err)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Fatalf("the refusal took %v: it waited", took)
	}
	close(release)
	wg.Wait()
	got, err := bound(context.Background(), nil, &grpc.UnaryServerInfo{}, func(context.Context, any) (any, error) { return "ran", nil })
	if err != nil || got != "ran" {
		t.Fatalf("after the flood: %v, %v", got, err)
	}
}

// A client trickling a request body is answered at once (the answer never
// needs the body), and a shutdown meanwhile ends cleanly and in time: the
// connection is closed after the answer rather than read to its end.
func TestATricklingBodyHoldsNeitherItsAnswerNorShutdown(t *testing.T) {
	c, err := ParseFlags([]string{"-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs, done := make(chan [2]string, 1), make(chan error, 1)
	go func() { done <- Run(ctx, c, quiet, func(h, g string) { addrs <- [2]string{h, g} }, nil) }()
	var httpAddr string
	select {
	case a := <-addrs:
		httpAddr = a[0]
	case err := <-done:
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /allow?key=k HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() { // a byte every 100 ms, as a slow client sends
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body trickled: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !resp.Close {
		t.Fatalf("answer %d, close %v: want 200 and the connection closed after it", resp.StatusCode, resp.Close)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(shutdownTimeout + 5*time.Second):
		t.Fatal("the server did not stop")
	}
	if took := time.Since(start); took >= shutdownTimeout {
		t.Fatalf("shutdown took %v: it waited for the trickling client", took)
	}
}
