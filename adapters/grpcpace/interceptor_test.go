package grpcpace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests run on the real clock with refill of 1 token per second and
// small buckets, which a test spends within milliseconds.

func limiter(t *testing.T, rate, burst int64, opts ...gopherpace.Option) *gopherpace.Limiter {
	t.Helper()
	l, err := gopherpace.New(append([]gopherpace.Option{gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(burst)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

type testService struct {
	testpb.UnimplementedTestServiceServer
	unary atomic.Int64
}

func (s *testService) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.unary.Add(1)
	return &testpb.SimpleResponse{}, nil
}

func (s *testService) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	for {
		if _, err := stream.Recv(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
}

// serve runs a real gRPC server on a loopback TCP port and returns a client.
func serve(t *testing.T, serverOpts []grpc.ServerOption, dialOpts ...grpc.DialOption) (testpb.TestServiceClient, *testService) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &testService{}
	srv := grpc.NewServer(serverOpts...)
	testpb.RegisterTestServiceServer(srv, svc)
	go srv.Serve(ln)
	conn, err := grpc.NewClient(ln.Addr().String(), append(dialOpts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
	})
	return testpb.NewTestServiceClient(conn), svc
}

func unaryServer(t *testing.T, l *gopherpace.Limiter, opts ...Option) grpc.ServerOption {
	t.Helper()
	return grpc.ChainUnaryInterceptor(UnaryServerInterceptor(l, opts...))
}

func streamServer(t *testing.T, l *gopherpace.Limiter, opts ...Option) grpc.ServerOption {
	t.Helper()
	return grpc.ChainStreamInterceptor(StreamServerInterceptor(l, opts...))
}

func call(c testpb.TestServiceClient, ctx context.Context) error {
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
	return err
}

func TestUnaryDenialCarriesRetryInfoAndNoKey(t *testing.T) {
	client, _ := serve(t, []grpc.ServerOption{unaryServer(t, limiter(t, 1, 2), WithPolicyName("per-peer"))})
	ctx := context.Background()
	for i := range 2 {
		if err := call(client, ctx); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	err := call(client, ctx)
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("third call: %v, want ResourceExhausted", err)
	}
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch v := d.(type) {
		case *errdetails.RetryInfo:
			retry = v
		case *errdetails.QuotaFailure:
			quota = v
		}
	}
	if retry == nil || retry.RetryDelay.AsDuration() <= 0 || retry.RetryDelay.AsDuration() > time.Second {
		t.Fatalf("RetryInfo %v, want a delay in (0, 1s]", retry)
	}
	if quota == nil || len(quota.Violations) != 1 || quota.Violations[0].Subject != "policy:per-peer" {
		t.Fatalf("QuotaFailure %v", quota)
	}
	if strings.Contains(err.Error()+quota.String(), "127.0.0.1") {
		t.Fatalf("the denial leaks the caller's key: %v %v", err, quota)
	}
}

// What a caller cannot fix by retrying fails with a code retry policies
// do not retry: InvalidArgument for a missing key or a cost out of range;
// Internal for the server's own faults, unless WithFailOpen.
func TestMetadataKeyCodesAndFailOpen(t *testing.T) {
	l := limiter(t, 1, 1)
	client, svc := serve(t, []grpc.ServerOption{unaryServer(t, l, WithKeyFunc(MetadataKey("x-api-key")))})
	withKey := func(k string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "x-api-key", k)
	}
	if err := call(client, withKey("alice")); err != nil {
		t.Fatal(err)
	}
	if err := call(client, withKey("bob")); err != nil {
		t.Fatalf("bob has a bucket of his own: %v", err)
	}
	// Every code with every adapter's message (adapter.Answer).
	answers := func(err error, code codes.Code, msg string) bool {
		st, _ := status.FromError(err)
		return st.Code() == code && st.Message() == msg
	}
	if err := call(client, withKey("alice")); !answers(err, codes.ResourceExhausted, adapter.DeniedMessage) {
		t.Fatalf("alice again: %v", err)
	}
	if err := call(client, context.Background()); !answers(err, codes.InvalidArgument, adapter.MissingKey("the x-api-key metadata").Error()) {
		t.Fatalf("no key: %v, want InvalidArgument naming the metadata", err)
	}
	big, _ := serve(t, []grpc.ServerOption{unaryServer(t, l, WithCost(func(context.Context, string) int64 { return 2 }))})
	if err := call(big, context.Background()); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), gopherpace.ErrCostExceedsLimit.Error()) {
		t.Fatalf("cost above the bucket: %v, want InvalidArgument", err)
	}
	down := WithKeyFunc(func(context.Context, string) (string, error) { return "", errors.New("tenant directory down") })
	closed, _ := serve(t, []grpc.ServerOption{unaryServer(t, l, down)})
	if err := call(closed, context.Background()); !answers(err, codes.Internal, adapter.ServerErrorMessage) {
		t.Fatalf("server fault: %v, want Internal saying only where", err)
	}
	open, _ := serve(t, []grpc.ServerOption{unaryServer(t, l, down, WithFailOpen())})
	if err := call(open, context.Background()); err != nil {
		t.Fatalf("fail-open: %v", err)
	}
	openMissing, _ := serve(t, []grpc.ServerOption{unaryServer(t, l, WithKeyFunc(MetadataKey("x-api-key")), WithFailOpen())})
	if err := call(openMissing, context.Background()); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("fail-open, no key: %v; the caller's own fault still fails", err)
	}
	if got := svc.unary.Load(); got != 2 {
		t.Fatalf("the first service handled %d calls, want 2", got)
	}
}

// Behind an L7 proxy every call comes from the proxy's address; with the
// proxy trusted, the caller it names in x-forwarded-for is the key, read
// from the right, and a caller's own entries change nothing.
func TestTrustedProxyMetadata(t *testing.T) {
	loopback := netip.MustParsePrefix("127.0.0.0/8")
	client, _ := serve(t, []grpc.ServerOption{unaryServer(t, limiter(t, 1, 1), WithTrustedProxies(loopback))})
	from := func(xff ...string) context.Context {
		md := metadata.MD{}
		for _, v := range xff {
			md.Append("x-forwarded-for", v)
		}
		return metadata.NewOutgoingContext(context.Background(), md)
	}
	if err := call(client, from("198.51.100.1")); err != nil {
		t.Fatal(err)
	}
	if err := call(client, from("198.51.100.2")); err != nil {
		t.Fatalf("another caller behind the proxy: %v", err)
	}
	if err := call(client, from("203.0.113.9, 198.51.100.1")); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a caller prepending an address: %v, want its own bucket, spent", err)
	}
	if err := call(client, from("2001:db8:1:2::9")); err != nil {
		t.Fatal(err)
	}
	if err := call(client, from("2001:db8:1:2::a")); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("same IPv6 /64: %v, want ResourceExhausted", err)
	}
	// Without the option, the proxy is the caller: one bucket for all.
	shared, _ := serve(t, []grpc.ServerOption{unaryServer(t, limiter(t, 1, 1))})
	if err := call(shared, from("198.51.100.1")); err != nil {
		t.Fatal(err)
	}
	if err := call(shared, from("198.51.100.2")); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("untrusted forwarding metadata changed the key: %v", err)
	}
}

func TestRefundDecisionAndDenyHandler(t *testing.T) {
	l := limiter(t, 1, 1)
	var seen gopherpace.Decision
	failing := grpc.ChainUnaryInterceptor(
		UnaryServerInterceptor(l, WithKeyFunc(GlobalKey), WithDecisionInContext(),
			WithRefund(func(c codes.Code) bool { return c == codes.Unavailable })),
		func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
			seen, _ = FromContext(ctx)
			return nil, status.Error(codes.Unavailable, "backend down")
		})
	client, _ := serve(t, []grpc.ServerOption{failing})
	for i := range 3 {
		if err := call(client, context.Background()); status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d: %v, want the handler's Unavailable, each refunded", i, err)
		}
	}
	if !seen.Allowed || seen.BucketSize != 1 {
		t.Fatalf("handler saw Decision %+v", seen)
	}
	custom, _ := serve(t, []grpc.ServerOption{unaryServer(t, limiter(t, 1, 1), WithKeyFunc(GlobalKey),
		WithDenyHandler(func(_ context.Context, method string, d gopherpace.Decision) error {
			return status.Errorf(codes.Unavailable, "busy; retry in %v", d.RetryAfter.Round(time.Second))
		}))})
	call(custom, context.Background())
	if err := call(custom, context.Background()); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "retry in 1s") {
		t.Fatalf("deny handler: %v", err)
	}
	// A deny handler that returns nil does not let the denied call run: it
	// fails with the default denial.
	careless, svc := serve(t, []grpc.ServerOption{unaryServer(t, limiter(t, 1, 1), WithKeyFunc(GlobalKey),
		WithDenyHandler(func(context.Context, string, gopherpace.Decision) error { return nil }))})
	call(careless, context.Background())
	ran := svc.unary.Load()
	if err := call(careless, context.Background()); status.Code(err) != codes.ResourceExhausted || svc.unary.Load() != ran {
		t.Fatalf("a deny handler returning nil: %v, and the handler ran %d times more", err, svc.unary.Load()-ran)
	}
}

func TestRateDescriptions(t *testing.T) {
	for _, tc := range []struct {
		limit  int64
		window time.Duration
		want   string
	}{
		{3, 3 * time.Second, "1 per second, bursts of 3"},
		{100, time.Hour, "100 per hour, bursts of 100"},
		{10, time.Minute, "10 per minute, bursts of 10"},
		{500, 100 * time.Millisecond, "5000 per second, bursts of 500"},
		{1, 48 * time.Hour, "0.5 per day, bursts of 1"},
	} {
		if got := describeRate(gopherpace.Decision{BucketSize: tc.limit, Window: tc.window}); got != tc.want {
			t.Errorf("limit %d over %v: %q, want %q", tc.limit, tc.window, got, tc.want)
		}
	}
}

func TestSkipCostAndHeaders(t *testing.T) {
	l := limiter(t, 1, 3)
	client, _ := serve(t, []grpc.ServerOption{unaryServer(t, l,
		WithKeyFunc(GlobalKey),
		WithCost(func(context.Context, string) int64 { return 2 }),
		WithSkip(func(ctx context.Context, _ string) bool {
			return len(metadata.ValueFromIncomingContext(ctx, "skip")) > 0
		}),
		WithHeaders(headers.Draft),
	)})
	var hdr metadata.MD
	if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	if got := hdr.Get("ratelimit"); len(got) != 1 || got[0] != `"default";r=1;t=1` {
		t.Fatalf("ratelimit header %q", hdr.Get("ratelimit"))
	}
	if err := call(client, context.Background()); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("cost 2 with 1 left: %v", err)
	}
	skip := metadata.AppendToOutgoingContext(context.Background(), "skip", "1")
	if err := call(client, skip); err != nil {
		t.Fatalf("skipped call: %v", err)
	}
}

func TestStreamOpenAndPerMessageLimits(t *testing.T) {
	// Opening costs 1, and with per-message limits each received message 1:
	// a bucket of 3 lets a stream open and carry two messages.
	client, _ := serve(t, []grpc.ServerOption{streamServer(t, limiter(t, 1, 3), WithKeyFunc(GlobalKey), WithPerMessage(true, false))})
	stream, err := client.FullDuplexCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := stream.Send(&testpb.StreamingOutputCallRequest{}); err != nil {
			t.Fatal(err)
		}
		_, err := stream.Recv()
		if i < 2 && err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if i == 2 && status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("message 3: %v, want ResourceExhausted", err)
		}
	}
	// Without per-message limits, only opening counts.
	client2, _ := serve(t, []grpc.ServerOption{streamServer(t, limiter(t, 1, 1), WithKeyFunc(GlobalKey))})
	s1, _ := client2.FullDuplexCall(context.Background())
	for range 5 {
		s1.Send(&testpb.StreamingOutputCallRequest{})
		if _, err := s1.Recv(); err != nil {
			t.Fatalf("messages on an open stream: %v", err)
		}
	}
	s1.CloseSend()
	s2, _ := client2.FullDuplexCall(context.Background())
	if _, err := s2.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second stream: %v, want ResourceExhausted at open", err)
	}
}

func TestClientInterceptorsThrottleOutgoingCalls(t *testing.T) {
	l := limiter(t, 1, 1)
	ci, err := BuildClient(l, WithKeyFunc(MethodKey))
	if err != nil {
		t.Fatal(err)
	}
	client, svc := serve(t, nil, grpc.WithUnaryInterceptor(ci.Unary), grpc.WithStreamInterceptor(ci.Stream))
	if err := call(client, context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := call(client, context.Background()); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second call: %v", err)
	}
	if got := svc.unary.Load(); got != 1 {
		t.Fatalf("server saw %d calls; the throttled one must not leave the client", got)
	}
	if _, err := client.FullDuplexCall(context.Background()); err != nil {
		t.Fatalf("first stream (another method, another bucket): %v", err)
	}
	if _, err := client.FullDuplexCall(context.Background()); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second stream: %v", err)
	}
}

func TestInvalidOptions(t *testing.T) {
	l := limiter(t, 1, 1)
	for name, opts := range map[string][]Option{
		"nil key": {WithKeyFunc(nil)}, "nil cost": {WithCost(nil)}, "nil skip": {WithSkip(nil)},
		"nil deny": {WithDenyHandler(nil)}, "nil refund": {WithRefund(nil)},
		"policy": {WithPolicyName("")}, "style": {WithHeaders(9)}, "nil option": {nil},
		"IPv6 prefix": {WithIPv6Prefix(0)}, "wait with also": {WithWait(), WithAlso(l, nil, "also")},
		"also without a limiter": {WithAlso(nil, nil, "also")}, "also without a name": {WithAlso(l, nil, "")},
		"wait with a delay": {WithWait(), WithMaxDelay(time.Second)}, "a queue without a delay": {WithMaxQueue(3)},
		"nil usage": {WithUsage(nil)},
	} {
		if _, err := BuildServer(l, opts...); err == nil || !strings.HasPrefix(err.Error(), "grpcpace: ") {
			t.Errorf("%s: error %v, want one starting grpcpace:", name, err)
		}
		if _, err := BuildClient(l, opts...); err == nil {
			t.Errorf("%s: BuildClient: no error", name)
		}
		for _, construct := range []func(){
			func() { UnaryServerInterceptor(l, opts...) }, func() { StreamServerInterceptor(l, opts...) },
			func() { UnaryClientInterceptor(l, opts...) }, func() { StreamClientInterceptor(l, opts...) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: an inline constructor did not panic", name)
					}
				}()
				construct()
			}()
		}
	}
	if _, err := BuildServer(nil); err == nil {
		t.Error("nil limiter: no error")
	}
}

func TestClusteredLimiter(t *testing.T) {
	net := memtransport.New(memtransport.WithRealTime())
	ta, _ := net.Join("a")
	tb, _ := net.Join("b")
	la := limiter(t, 1, 2, gopherpace.WithTransport(ta))
	lb := limiter(t, 1, 2, gopherpace.WithTransport(tb))
	clientA, _ := serve(t, []grpc.ServerOption{unaryServer(t, la, WithKeyFunc(GlobalKey))})
	clientB, _ := serve(t, []grpc.ServerOption{unaryServer(t, lb, WithKeyFunc(GlobalKey))})
	deadline := time.Now().Add(5 * time.Second)
	for la.Stats().HeardNodes < 2 || lb.Stats().HeardNodes < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the nodes never heard each other")
		}
		time.Sleep(time.Millisecond)
	}
	for range 2 {
		if err := call(clientA, context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for lb.Stats().TokensCharged < 2 {
		if time.Now().After(deadline) {
			t.Fatal("node b was never charged node a's tokens")
		}
		time.Sleep(time.Millisecond)
	}
	if err := call(clientB, context.Background()); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("node b: %v, want ResourceExhausted after the bucket was spent on a", err)
	}
}

// In a synctest bubble the clock is virtual: the bucket refills exactly
// when its rate says. The interceptor is called as gRPC calls it, with the
// caller's peer in the context.
func TestRefillsWithVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		icpt := UnaryServerInterceptor(limiter(t, 2, 1))
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 5000}})
		info := &grpc.UnaryServerInfo{FullMethod: "/grpc.testing.TestService/UnaryCall"}
		handler := func(context.Context, any) (any, error) { return nil, nil }
		code := func() codes.Code {
			_, err := icpt(ctx, nil, info, handler)
			return status.Code(err)
		}
		got := []codes.Code{code(), code()}
		time.Sleep(499 * time.Millisecond)
		got = append(got, code())
		time.Sleep(time.Millisecond) // one token at 2/s after 500ms
		got = append(got, code())
		if fmt.Sprint(got) != "[OK ResourceExhausted ResourceExhausted OK]" {
			t.Fatalf("codes %v, want [OK ResourceExhausted ResourceExhausted OK]", got)
		}
	})
}

// Further limits: a call passes the interceptor's own limit and every
// WithAlso one, or spends from none; the QuotaFailure names the policy
// that denied.
func TestAlsoLimitsAllOrNothing(t *testing.T) {
	perCaller := limiter(t, 1, 2)
	perKey := limiter(t, 1, 3)
	client, _ := serve(t, []grpc.ServerOption{unaryServer(t, perCaller,
		WithKeyFunc(MetadataKey("x-caller")), WithAlso(perKey, MetadataKey("x-api-key"), "per-key"))})
	from := func(caller, key string) error {
		return call(client, metadata.AppendToOutgoingContext(context.Background(), "x-caller", caller, "x-api-key", key))
	}
	for i := range 2 {
		if err := from("a", "k"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if err := from("a", "k"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("caller a's third: %v", err)
	}
	if err := from("b", "k"); err != nil {
		t.Fatalf("caller b: %v; the key's last token must have been kept", err)
	}
	err := from("c", "k")
	var quota *errdetails.QuotaFailure
	for _, d := range status.Convert(err).Details() {
		if q, ok := d.(*errdetails.QuotaFailure); ok {
			quota = q
		}
	}
	if status.Code(err) != codes.ResourceExhausted || quota == nil || quota.Violations[0].Subject != "policy:per-key" {
		t.Fatalf("key spent: %v %v", err, quota)
	}
	if err := from("c", "other"); err != nil {
		t.Fatalf("caller c with another key: %v; c's tokens must have been kept", err)
	}
}

// A client that waits gets its call through when the token comes, and
// fails at once when the token would come after its deadline.
func TestClientWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		icpt := UnaryClientInterceptor(limiter(t, 10, 1), WithWait())
		invoked := 0
		invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			invoked++
			return nil
		}
		start := time.Now()
		for range 3 {
			if err := icpt(context.Background(), "/m", nil, nil, nil, invoker); err != nil {
				t.Fatal(err)
			}
		}
		if invoked != 3 || time.Since(start) != 200*time.Millisecond {
			t.Fatalf("%d calls after %v, want 3 after 200ms at 10/s", invoked, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := icpt(ctx, "/m", nil, nil, nil, invoker); status.Code(err) != codes.ResourceExhausted || invoked != 3 {
			t.Fatalf("token after the deadline: %v (invoked %d)", err, invoked)
		}
	})
}

// With a delay allowed, a call whose tokens are due within it waits for
// them; one due later is refused at once.
func TestShapedCallsWait(t *testing.T) {
	c, _ := serve(t, []grpc.ServerOption{unaryServer(t, limiter(t, 20, 1), WithKeyFunc(GlobalKey), WithMaxDelay(5*time.Second))})
	start := time.Now()
	for i := range 4 {
		if err := call(c, t.Context()); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if took := time.Since(start); took < 140*time.Millisecond {
		t.Fatalf("4 calls at 20 a second with a bucket of 1 took %v: they did not wait", took)
	}
	c, _ = serve(t, []grpc.ServerOption{unaryServer(t, limiter(t, 1, 1), WithKeyFunc(GlobalKey), WithMaxDelay(10*time.Millisecond))})
	if err := call(c, t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := call(c, t.Context()); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a call whose token is a second off with 10 ms allowed: %v, want ResourceExhausted", err)
	}
}

// What a call used, measured when it ends, is charged beyond its cost,
// into debt that refuses the key until refill repays it.
func TestUsageIsChargedAfterTheCall(t *testing.T) {
	used := func(ctx context.Context, method string, resp any, err error) int64 {
		if _, ok := resp.(*testpb.SimpleResponse); !ok || err != nil {
			t.Errorf("usage func given %T, %v", resp, err)
		}
		return 6
	}
	c, _ := serve(t, []grpc.ServerOption{unaryServer(t, limiter(t, 1, 10), WithKeyFunc(GlobalKey), WithUsage(used))})
	for i := range 2 { // 4 left after the first, 2 in debt after the second
		if err := call(c, t.Context()); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if err := call(c, t.Context()); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a call while the key is in debt: %v, want ResourceExhausted", err)
	}
}

// A client with a Pacer, calling a server limited by these interceptors
// at 20 a second with a bucket of 1: no call fails, each waits out the
// refusal's RetryInfo, and after the first refusal later calls wait
// before they are sent.
func TestPacerWaitsOutRefusals(t *testing.T) {
	var p Pacer
	c, svc := serve(t, []grpc.ServerOption{unaryServer(t, limiter(t, 20, 1), WithKeyFunc(GlobalKey))},
		grpc.WithChainUnaryInterceptor(p.Unary()))
	start := time.Now()
	for i := range 6 {
		if err := call(c, t.Context()); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if took := time.Since(start); took < 240*time.Millisecond {
		t.Fatalf("6 calls at 20 a second with a bucket of 1 took %v", took)
	}
	if n := svc.unary.Load(); n != 6 {
		t.Fatalf("the handler ran %d times for 6 calls", n)
	}
	// A refusal asking for more than MaxWait is returned.
	short := Pacer{MaxWait: time.Millisecond}
	c, _ = serve(t, []grpc.ServerOption{unaryServer(t, limiter(t, 1, 1), WithKeyFunc(GlobalKey))},
		grpc.WithChainUnaryInterceptor(short.Unary()))
	call(c, t.Context())
	if err := call(c, t.Context()); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a refusal of a second with a MaxWait of 1 ms: %v, want it returned", err)
	}
	// A ResourceExhausted without RetryInfo is the caller's.
	var plain Pacer
	bare := grpc.UnaryServerInterceptor(func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
		return nil, status.Error(codes.ResourceExhausted, "disk full")
	})
	c, _ = serve(t, []grpc.ServerOption{grpc.ChainUnaryInterceptor(bare)}, grpc.WithChainUnaryInterceptor(plain.Unary()))
	if err := call(c, t.Context()); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a refusal with no RetryInfo: %v", err)
	}
}

// blockingService holds every unary call until its gate closes.
type blockingService struct {
	testpb.UnimplementedTestServiceServer
	entered chan struct{}
	gate    chan struct{}
}

func (s *blockingService) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	return (&testService{}).FullDuplexCall(stream)
}

func (s *blockingService) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.entered <- struct{}{}
	select {
	case <-s.gate:
	case <-ctx.Done():
	}
	return &testpb.SimpleResponse{}, nil
}

// With a cap of 2 in flight, a third call over a real connection fails at
// once with ResourceExhausted and RetryInfo, and the slots come back when
// the calls end.
func TestConcurrencyCapsCallsInFlight(t *testing.T) {
	f, err := gopherpace.NewInFlight(2)
	if err != nil {
		t.Fatal(err)
	}
	ics, err := BuildConcurrency(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := BuildConcurrency(nil, nil); err == nil {
		t.Fatal("a nil limit was accepted")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &blockingService{entered: make(chan struct{}, 3), gate: make(chan struct{})}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(ics.Unary), grpc.ChainStreamInterceptor(ics.Stream))
	testpb.RegisterTestServiceServer(srv, svc)
	go srv.Serve(ln)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	defer conn.Close()
	client := testpb.NewTestServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 2)
	for range 2 {
		go func() { done <- call(client, ctx) }()
	}
	<-svc.entered
	<-svc.entered
	err = call(client, ctx)
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || len(st.Details()) != 1 {
		t.Fatalf("a third call: %v", err)
	}
	if ri, ok := st.Details()[0].(*errdetails.RetryInfo); !ok || ri.RetryDelay.AsDuration() != time.Second {
		t.Fatalf("details %v", st.Details())
	}
	close(svc.gate)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if own, _ := f.Count(""); own != 0 {
		t.Fatalf("%d in flight after the calls", own)
	}
	if err := call(client, ctx); err != nil {
		t.Fatalf("a call after the others: %v", err)
	}
	// A stream holds a slot while it lasts.
	stream, err := client.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&testpb.StreamingOutputCallRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if own, _ := f.Count(""); own != 1 {
		t.Fatalf("an open stream holds %d slots", own)
	}
	stream.CloseSend()
	if _, err := stream.Recv(); err == nil {
		t.Fatal("the stream did not end")
	}
	deadline := time.Now().Add(5 * time.Second)
	for own, _ := f.Count(""); own != 0; own, _ = f.Count("") {
		if time.Now().After(deadline) {
			t.Fatalf("an ended stream still holds %d", own)
		}
		time.Sleep(time.Millisecond)
	}
}
