package rlserver

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// rlsFixture is the RateLimitService on a real gRPC server on loopback,
// and a client generated from Envoy's protos.
type rlsFixture struct {
	svc     *rlsService
	metrics *serviceMetrics
	conn    *grpc.ClientConn
	client  rlspb.RateLimitServiceClient
}

// fixtureOptions are newRLS's choices beyond the config and headers.
type fixtureOptions struct {
	reflection bool
	maxKeys    int64
}

func withReflection() func(*fixtureOptions) { return func(o *fixtureOptions) { o.reflection = true } }
func withMaxKeys(n int64) func(*fixtureOptions) {
	return func(o *fixtureOptions) { o.maxKeys = n }
}

func newRLS(t *testing.T, config string, headers bool, opts ...func(*fixtureOptions)) *rlsFixture {
	o := fixtureOptions{maxKeys: gopherpace.DefaultMaxKeys}
	for _, f := range opts {
		f(&o)
	}
	t.Helper()
	var cfg *rlsConfig
	if config != "" {
		var err error
		if cfg, err = parseRLSConfig("test.yaml", []byte(config)); err != nil {
			t.Fatal(err)
		}
	}
	httpLimiter, err := gopherpace.New(gopherpace.WithRefillRate(10))
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := newServiceMetrics(httpLimiter, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := newRLSService(cfg, nil, o.maxKeys, headers, quiet, metrics)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := newGRPCServer(svc, grpcOptions{metrics: metrics, reflection: o.reflection})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		g.Stop()
		svc.close()
		httpLimiter.Close()
	})
	return &rlsFixture{svc, metrics, conn, rlspb.NewRateLimitServiceClient(conn)}
}

func descriptor(kv ...string) *rlv3.RateLimitDescriptor {
	return &rlv3.RateLimitDescriptor{Entries: entries(kv...)}
}

func (f *rlsFixture) ask(t *testing.T, req *rlspb.RateLimitRequest) *rlspb.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := f.client.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Statuses) != len(req.Descriptors) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
	}
	return resp
}

// remaining is what rule id's bucket for the descriptor holds now.
func (f *rlsFixture) remaining(t *testing.T, id string, kv ...string) int64 {
	t.Helper()
	l := f.svc.limiterFor(id)
	if l == nil {
		t.Fatalf("no limiter for %s", id)
	}
	r, key := f.svc.rules.Load().cfg.match("edge", entries(kv...), nil)
	return l.Peek(bucketKey(r, key)).Remaining
}

// Minute-long units keep these tests free of refills: a token of 20 a
// minute takes 3 s to come back.
func TestRLSDeniesOverTheLimitWithEachStatus(t *testing.T) {
	f := newRLS(t, edgeConfig, false)
	req := &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("remote_address", "10.1.1.1")}}
	for i := range 20 {
		resp := f.ask(t, req)
		st := resp.Statuses[0]
		if resp.OverallCode != rlspb.RateLimitResponse_OK || st.Code != rlspb.RateLimitResponse_OK {
			t.Fatalf("request %d: %v", i+1, resp)
		}
		if st.LimitRemaining != uint32(19-i) {
			t.Fatalf("request %d: remaining %d, want %d", i+1, st.LimitRemaining, 19-i)
		}
		if l := st.CurrentLimit; l.RequestsPerUnit != 20 || l.Unit != rlspb.RateLimitResponse_RateLimit_MINUTE {
			t.Fatalf("current limit %v", l)
		}
		if d := st.DurationUntilReset.AsDuration(); d <= 0 || d > time.Minute {
			t.Fatalf("duration until reset %v", d)
		}
	}
	resp := f.ask(t, req)
	if resp.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].Code != rlspb.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("the 21st: %v", resp)
	}
	// Over the limit, the reset is the next token's: 3 s at 20 a minute.
	if d := resp.Statuses[0].DurationUntilReset.AsDuration(); d <= 0 || d > 3*time.Second {
		t.Fatalf("the 21st's duration until reset is %v, want its next token's, at most 3s", d)
	}
	// Another address has its own bucket.
	other := f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("remote_address", "10.1.1.2")}})
	if other.OverallCode != rlspb.RateLimitResponse_OK || other.Statuses[0].LimitRemaining != 19 {
		t.Fatalf("another address: %v", other)
	}
	if got := testutil.ToFloat64(f.metrics.requests.WithLabelValues(outcomeOverLimit)); got != 1 {
		t.Errorf("over_limit counted %v times", got)
	}
}

// A request any limit denies spends from none of them.
func TestRLSAllOrNothing(t *testing.T) {
	f := newRLS(t, edgeConfig, false)
	addr := []string{"remote_address", "10.2.2.2"}
	req := func(extra ...*rlv3.RateLimitDescriptor) *rlspb.RateLimitRequest {
		return &rlspb.RateLimitRequest{Domain: "edge", Descriptors: append([]*rlv3.RateLimitDescriptor{descriptor(addr...)}, extra...)}
	}
	f.ask(t, req())
	if r := f.remaining(t, "edge.remote_address", addr...); r != 19 {
		t.Fatalf("remaining %d after one", r)
	}
	// requests_per_unit 0 denies everything: the address spends nothing.
	resp := f.ask(t, req(descriptor("blocked", "x")))
	if resp.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].Code != rlspb.RateLimitResponse_OK || resp.Statuses[1].Code != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("with a blocked descriptor: %v", resp)
	}
	if r := f.remaining(t, "edge.remote_address", addr...); r != 19 {
		t.Fatalf("the denied request spent: remaining %d", r)
	}
	// A cost the second limit cannot grant: the first gives its tokens back.
	resp = f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", HitsAddend: 8, Descriptors: []*rlv3.RateLimitDescriptor{
		descriptor(addr...), descriptor("tenant", "acme", "user", "bob")}})
	if resp.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT || resp.Statuses[1].Code != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("8 hits against a bucket of 5: %v", resp)
	}
	if r := f.remaining(t, "edge.remote_address", addr...); r != 19 {
		t.Fatalf("the denied request spent: remaining %d", r)
	}
	// The order does not matter: the denying limit first.
	resp = f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("blocked", "y"), descriptor(addr...)}})
	if resp.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT || resp.Statuses[1].Code != rlspb.RateLimitResponse_OK || resp.Statuses[1].LimitRemaining != 19 {
		t.Fatalf("denying first: %v", resp)
	}
	if r := f.remaining(t, "edge.remote_address", addr...); r != 19 {
		t.Fatalf("the denied request spent: remaining %d", r)
	}
}

func TestRLSHitsAddend(t *testing.T) {
	f := newRLS(t, edgeConfig, false)
	addr := []string{"remote_address", "10.3.3.3"}
	ask := func(hits uint32, d *rlv3.RateLimitDescriptor) *rlspb.RateLimitResponse {
		return f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", HitsAddend: hits, Descriptors: []*rlv3.RateLimitDescriptor{d}})
	}
	// The request's hits_addend; 0 (unset) is 1, as Envoy's proto says.
	if st := ask(0, descriptor(addr...)).Statuses[0]; st.LimitRemaining != 19 {
		t.Fatalf("hits 0: %v", st)
	}
	if st := ask(4, descriptor(addr...)).Statuses[0]; st.LimitRemaining != 15 {
		t.Fatalf("hits 4: %v", st)
	}
	// A descriptor's own hits_addend wins; 0 there only checks.
	d := descriptor(addr...)
	d.HitsAddend = wrapperspb.UInt64(3)
	if st := ask(9, d).Statuses[0]; st.LimitRemaining != 12 {
		t.Fatalf("descriptor hits 3: %v", st)
	}
	d.HitsAddend = wrapperspb.UInt64(0)
	if st := ask(9, d).Statuses[0]; st.LimitRemaining != 12 || st.Code != rlspb.RateLimitResponse_OK {
		t.Fatalf("descriptor hits 0: %v", st)
	}
	// is_negative_hits gives tokens back.
	d.HitsAddend, d.IsNegativeHits = wrapperspb.UInt64(2), true
	if st := ask(0, d).Statuses[0]; st.LimitRemaining != 14 {
		t.Fatalf("2 negative hits: %v", st)
	}
	// More than the bucket holds, up to the most a descriptor can say:
	// over the limit, nothing spent.
	for _, hits := range []uint64{21, math.MaxUint32, math.MaxUint64} {
		d := descriptor(addr...)
		d.HitsAddend = wrapperspb.UInt64(hits)
		resp := ask(0, d)
		if resp.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].LimitRemaining != 14 {
			t.Fatalf("%d hits: %v", hits, resp)
		}
	}
	if st := ask(math.MaxUint32, descriptor(addr...)).Statuses[0]; st.Code != rlspb.RateLimitResponse_OVER_LIMIT || st.LimitRemaining != 14 {
		t.Fatalf("request hits MaxUint32: %v", st)
	}
}

// A negative hit gives back exactly what it names, never more than its
// key can have spent within its window: a caller that emptied its bucket
// cannot refill it with hits_addend 2^63-1 (the request is InvalidArgument,
// counted as invalid, and what its other descriptors took is given back),
// but may give back what it did spend.
func TestNegativeHitsCannotRefill(t *testing.T) {
	f := newRLS(t, edgeConfig, false)
	addr := []string{"remote_address", "10.4.4.4"}
	other := []string{"remote_address", "10.4.4.5"}
	negative := func(hits uint64) *rlv3.RateLimitDescriptor {
		d := descriptor(addr...)
		d.HitsAddend, d.IsNegativeHits = wrapperspb.UInt64(hits), true
		return d
	}
	f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", HitsAddend: 20, Descriptors: []*rlv3.RateLimitDescriptor{descriptor(addr...)}})
	for _, hits := range []uint64{math.MaxInt64, math.MaxUint64, 41} {
		_, err := f.client.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "edge",
			Descriptors: []*rlv3.RateLimitDescriptor{descriptor(other...), negative(hits)}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "refund exceeds what the key spent") {
			t.Fatalf("%d negative hits on an emptied bucket of 20: %v, want InvalidArgument", hits, err)
		}
		if r := f.remaining(t, "edge.remote_address", addr...); r != 0 {
			t.Fatalf("%d negative hits refilled the bucket to %d", hits, r)
		}
		if r := f.remaining(t, "edge.remote_address", other...); r != 20 {
			t.Fatalf("the refused request's other descriptor spent: %d left", r)
		}
	}
	if st := f.svc.limiterFor("edge.remote_address").Stats(); st.RefundsRefused != 3 {
		t.Fatalf("%d refunds refused, want 3", st.RefundsRefused)
	}
	if st := f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{negative(7)}}).Statuses[0]; st.LimitRemaining != 7 {
		t.Fatalf("7 negative hits after spending 20: %v, want exactly 7 back", st)
	}
}

func TestRLSShadowUnlimitedAndReplaces(t *testing.T) {
	f := newRLS(t, edgeConfig+`
  - key: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`, false)
	trial := &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("trial", "t")}}
	f.ask(t, trial)
	if resp := f.ask(t, trial); resp.OverallCode != rlspb.RateLimitResponse_OK || resp.Statuses[0].Code != rlspb.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("shadow mode over its limit: %v", resp)
	}
	resp := f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("health", "x")}})
	if st := resp.Statuses[0]; st.Code != rlspb.RateLimitResponse_OK || st.LimitRemaining != math.MaxUint32 || st.CurrentLimit != nil {
		t.Fatalf("unlimited: %v", st)
	}
	// promo replaces free_plan: the plan's limit is not checked or spent.
	resp = f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("plan", "free"), descriptor("promo", "p")}})
	if resp.Statuses[0].CurrentLimit != nil || resp.Statuses[1].CurrentLimit.RequestsPerUnit != 5000 {
		t.Fatalf("replaces: %v", resp)
	}
	if r := f.remaining(t, "edge.plan_free", "plan", "free"); r != 1000 {
		t.Fatalf("the replaced limit spent: %d left", r)
	}
	resp = f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("plan", "free")}})
	if resp.Statuses[0].CurrentLimit.GetName() != "free_plan" || resp.Statuses[0].LimitRemaining != 999 {
		t.Fatalf("not replaced: %v", resp)
	}
	// No limit at all: OK, with no current limit.
	resp = f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("remote_address", "10.0.0.2")}})
	if resp.OverallCode != rlspb.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit != nil {
		t.Fatalf("an allow-listed value: %v", resp)
	}
}

func TestRLSResponseHeaders(t *testing.T) {
	f := newRLS(t, edgeConfig, true)
	resp := f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{
		descriptor("remote_address", "10.4.4.4"), descriptor("tenant", "acme", "user", "eve")}})
	got := map[string]string{}
	for _, h := range resp.ResponseHeadersToAdd {
		got[h.Key] = h.Value
	}
	// The user's limit (5 a second, 4 left) is closer to denying than the
	// address's (20 a minute, 19 left).
	if got[headerLimit] != "5" || got[headerRemaining] != "4" || got[headerReset] != "1" || len(got) != 3 {
		t.Fatalf("headers %v", got)
	}
	off := newRLS(t, edgeConfig, false)
	if resp := off.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("remote_address", "x")}}); len(resp.ResponseHeadersToAdd) != 0 {
		t.Fatalf("headers without -response-headers: %v", resp.ResponseHeadersToAdd)
	}
}

// Bad requests are refused with InvalidArgument, saying why, and spend
// nothing; a domain without limits is answered OK, as envoyproxy/ratelimit
// answers it, and counted.
func TestRLSBadRequests(t *testing.T) {
	f := newRLS(t, edgeConfig, false)
	addr := descriptor("remote_address", "10.5.5.5")
	long := strings.Repeat("x", maxEntryBytes+1)
	many := func(n int, d func() *rlv3.RateLimitDescriptor) []*rlv3.RateLimitDescriptor {
		out := []*rlv3.RateLimitDescriptor{addr}
		for len(out) < n {
			out = append(out, d())
		}
		return out
	}
	deep := &rlv3.RateLimitDescriptor{}
	for range maxEntries + 1 {
		deep.Entries = append(deep.Entries, &rlv3.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
	}
	override := descriptor("remote_address", "10.5.5.5")
	override.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1000} // unit UNKNOWN
	for _, tc := range []struct {
		name string
		req  *rlspb.RateLimitRequest
		want string
	}{
		{"no domain", &rlspb.RateLimitRequest{Descriptors: []*rlv3.RateLimitDescriptor{addr}}, "the domain must not be empty"},
		{"a long domain", &rlspb.RateLimitRequest{Domain: long, Descriptors: []*rlv3.RateLimitDescriptor{addr}}, "the domain is longer than"},
		{"no descriptors", &rlspb.RateLimitRequest{Domain: "edge"}, "the descriptor list must not be empty"},
		{"too many descriptors", &rlspb.RateLimitRequest{Domain: "edge", Descriptors: many(maxDescriptors+1, func() *rlv3.RateLimitDescriptor { return descriptor("health", "h") })}, "65 descriptors"},
		{"an empty descriptor", &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{addr, {}}}, "descriptor 1: no entries"},
		{"too many entries", &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{addr, deep}}, "17 entries"},
		{"an empty key", &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{addr, descriptor("", "v")}}, "an entry has an empty key"},
		{"a long key", &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{addr, descriptor(long, "v")}}, "longer than 1024 bytes"},
		{"a long value", &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{addr, descriptor("remote_address", long)}}, "longer than 1024 bytes"},
		{"a limit override without a unit", &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{override}}, "the limit override's unit UNKNOWN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.client.ShouldRateLimit(context.Background(), tc.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want InvalidArgument saying %q", err, tc.want)
			}
			if r := f.remaining(t, "edge.remote_address", "remote_address", "10.5.5.5"); r != 20 {
				t.Fatalf("a refused request spent: %d left", r)
			}
		})
	}
	resp := f.ask(t, &rlspb.RateLimitRequest{Domain: "egde", Descriptors: []*rlv3.RateLimitDescriptor{addr}})
	if resp.OverallCode != rlspb.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit != nil {
		t.Fatalf("unknown domain: %v", resp)
	}
	if got := testutil.ToFloat64(f.metrics.requests.WithLabelValues(outcomeUnknownDomain)); got != 1 {
		t.Errorf("unknown domain counted %v times", got)
	}
	if got := testutil.ToFloat64(f.metrics.requests.WithLabelValues(outcomeOK)); got != 0 {
		t.Errorf("the unknown domain's call is also counted ok (%v)", got)
	}
	// Bytes that are no protobuf: an error, and the server goes on.
	garbage := []byte{0xff, 0xff, 0xff, 0x0f, 0x01}
	before := testutil.ToFloat64(f.metrics.requests.WithLabelValues(outcomeBadRequest))
	err := f.conn.Invoke(context.Background(), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", &garbage, new([]byte), grpc.ForceCodecV2(rawCodec{}))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "not a RateLimitRequest") {
		t.Fatalf("garbage: %v, want InvalidArgument", err)
	}
	if got := testutil.ToFloat64(f.metrics.requests.WithLabelValues(outcomeBadRequest)); got != before+1 {
		t.Errorf("garbage counted %v times as invalid", got-before)
	}
	if resp := f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{addr}}); resp.Statuses[0].LimitRemaining != 19 {
		t.Fatalf("after garbage: %v", resp)
	}
}

// rawCodec sends bytes as they are, to put a malformed message on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// Health is served; reflection only when asked for (-grpc-reflection):
// it tells anyone who can reach the port what the server offers.
func TestGRPCHealthAndReflection(t *testing.T) {
	f := newRLS(t, edgeConfig, false)
	h := healthpb.NewHealthClient(f.conn)
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		resp, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health of %q: %v %v", svc, resp, err)
		}
	}
	off, err := reflectpb.NewServerReflectionClient(f.conn).ServerReflectionInfo(context.Background())
	if err == nil {
		_, err = off.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("reflection by default: %v, want Unimplemented", err)
	}
	f = newRLS(t, edgeConfig, false, withReflection())
	stream, err := reflectpb.NewServerReflectionClient(f.conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "envoy.service.ratelimit.v3.RateLimitService") {
		t.Fatalf("reflection lists %v", names)
	}
}

// A reload keeps the buckets of every rule whose rate stays; a rule whose
// rate changed is decided by its new rate's limiter, from a full bucket;
// a removed rule limits nothing, and the limiter of a rate no rule has
// any more is closed; a bad file is refused with the old limits kept.
func TestRLSReloadKeepsBuckets(t *testing.T) {
	f := newRLS(t, edgeConfig, false)
	addr := []string{"remote_address", "10.6.6.6"}
	req := &rlspb.RateLimitRequest{Domain: "edge", HitsAddend: 5, Descriptors: []*rlv3.RateLimitDescriptor{descriptor(addr...)}}
	plan := &rlspb.RateLimitRequest{Domain: "edge", HitsAddend: 7, Descriptors: []*rlv3.RateLimitDescriptor{descriptor("plan", "free")}}
	f.ask(t, req)
	f.ask(t, plan)
	planLimiter := f.svc.limiterFor("edge.plan_free")
	users := f.svc.limiterFor("edge.tenant_acme.user") // 5 a second: no other rule's rate
	path := filepath.Join(t.TempDir(), "limits.yaml")
	write := func(text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// remote_address goes from 20 to 40 a minute; the tenant's user limits
	// go, and with them the only rules of 5 and 50 a second.
	changed := strings.Replace(edgeConfig, "{unit: minute, requests_per_unit: 20}", "{unit: minute, requests_per_unit: 40}", 1)
	changed = changed[:strings.Index(changed, "  - key: tenant\n")] + changed[strings.Index(changed, "  - key: remote_address\n"):]
	write(changed)
	if err := f.svc.reload(path); err != nil {
		t.Fatal(err)
	}
	if f.svc.limiterFor("edge.plan_free") != planLimiter {
		t.Fatal("the reload replaced the limiter of a rate that stayed")
	}
	if st := f.ask(t, plan).Statuses[0]; st.LimitRemaining != 1000-14 {
		t.Fatalf("plan_free after the reload: %v, want its 7 spent still spent", st)
	}
	l := f.svc.limiterFor("edge.remote_address")
	if tokens, per := l.Rate(); tokens != 40 || per != time.Minute || l.BucketSize() != 40 {
		t.Fatalf("remote_address decided at %d per %v, bucket %d", tokens, per, l.BucketSize())
	}
	// Its 5 spent at the old rate are not carried to the new one.
	if st := f.ask(t, req).Statuses[0]; st.CurrentLimit.RequestsPerUnit != 40 || st.LimitRemaining != 35 {
		t.Fatalf("after the reload: %v", st)
	}
	if f.svc.limiterFor("edge.tenant_acme.user") != nil {
		t.Fatal("a removed rule still has a limiter")
	}
	if !users.Stats().Closed {
		t.Fatal("the limiter of a rate no rule has is still open")
	}
	resp := f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("tenant", "acme", "user", "bob")}})
	if resp.Statuses[0].CurrentLimit != nil {
		t.Fatalf("a removed rule still limits: %v", resp)
	}
	write("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minit, requests_per_unit: 1}\n")
	if err := f.svc.reload(path); err == nil || !strings.Contains(err.Error(), "limits.yaml:4") {
		t.Fatalf("a bad file: %v", err)
	}
	if f.svc.limiterFor("edge.remote_address") != l || f.svc.limiterFor("edge.plan_free") != planLimiter {
		t.Fatal("a refused file changed the limits")
	}
	if got := testutil.ToFloat64(f.metrics.configLoads.WithLabelValues("refused")); got != 1 {
		t.Errorf("refused loads counted %v", got)
	}
	if got := testutil.ToFloat64(f.metrics.configLoads.WithLabelValues("loaded")); got != 1 {
		t.Errorf("loads counted %v", got)
	}
}

// Rules of one rate share its limiter, and never a bucket: two rules of
// 20 a minute, and two values of one of them, each spend only their own.
func TestRLSRulesOfOneRateShareALimiterNotABucket(t *testing.T) {
	f := newRLS(t, "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 20}\n"+
		"  - key: b\n    value: x\n    rate_limit: {unit: minute, requests_per_unit: 20}\n", false)
	if f.svc.limiterFor("edge.a") != f.svc.limiterFor("edge.b_x") || len(f.svc.rules.Load().limiters) != 1 {
		t.Fatal("two rules of one rate have limiters of their own")
	}
	ask := func(d *rlv3.RateLimitDescriptor) *rlspb.RateLimitResponse_DescriptorStatus {
		return f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", HitsAddend: 20, Descriptors: []*rlv3.RateLimitDescriptor{d}}).Statuses[0]
	}
	for _, d := range []*rlv3.RateLimitDescriptor{descriptor("a", "1"), descriptor("a", "2"), descriptor("b", "x")} {
		if st := ask(d); st.Code != rlspb.RateLimitResponse_OK {
			t.Fatalf("%v: %v, want its own bucket of 20", d, st)
		}
	}
	if st := ask(descriptor("a", "1")); st.Code != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("a=1 spent twice: %v", st)
	}
}

// Reloads while decisions run: no decision fails, and a rule that stays
// keeps its bucket through every reload (none refills it).
func TestRLSReloadUnderLoad(t *testing.T) {
	const perMinute = 20 // remote_address's limit in edgeConfig
	f := newRLS(t, edgeConfig, false)
	before := f.svc.limiterFor("edge.remote_address")
	path := filepath.Join(t.TempDir(), "limits.yaml")
	other := strings.Replace(edgeConfig, "requests_per_unit: 1000", "requests_per_unit: 2000", 1)
	if other == edgeConfig {
		t.Fatal("the second config is the first")
	}
	req := &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("remote_address", "10.9.9.9")}}
	var admitted, asked atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	begin := time.Now()
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := f.client.ShouldRateLimit(ctx, req)
				cancel()
				if err != nil {
					t.Errorf("a decision failed during the reloads: %v", err)
					return
				}
				asked.Add(1)
				if resp.OverallCode == rlspb.RateLimitResponse_OK {
					admitted.Add(1)
				}
			}
		})
	}
	for i := range 20 {
		text := edgeConfig
		if i%2 == 0 {
			text = other
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.reload(path); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // decisions in between, as a watch's reloads are apart
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(begin)
	most := perMinute + int64(elapsed.Minutes()*perMinute) + 1
	t.Logf("%d of %d decisions admitted in %v across 20 reloads", admitted.Load(), asked.Load(), elapsed)
	if asked.Load() < 100 {
		t.Fatalf("only %d decisions ran during the reloads: the test proves nothing", asked.Load())
	}
	if admitted.Load() < perMinute || admitted.Load() > most {
		t.Fatalf("admitted %d across the reloads, want the bucket's %d and at most %d: a reload refilled it", admitted.Load(), perMinute, most)
	}
	if f.svc.limiterFor("edge.remote_address") != before {
		t.Fatal("a reload replaced a limiter whose rule stayed")
	}
}

// The watch reloads when the file changes and on SIGHUP's channel.
func TestRLSWatchReloads(t *testing.T) {
	f := newRLS(t, edgeConfig, false)
	path := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(path, []byte(edgeConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	seen := fingerprint(path)
	go func() { f.svc.watch(ctx, path, 10*time.Millisecond, hup, seen); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("never: %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := os.WriteFile(path, []byte(edgeConfig+"  - key: added\n    rate_limit: {unit: second, requests_per_unit: 3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("the changed file is loaded", func() bool { return f.svc.limiterFor("edge.added") != nil })
	loads := testutil.ToFloat64(f.metrics.configLoads.WithLabelValues("loaded"))
	hup <- os.Interrupt
	waitFor("SIGHUP reloads", func() bool { return testutil.ToFloat64(f.metrics.configLoads.WithLabelValues("loaded")) > loads })
}
