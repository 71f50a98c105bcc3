package rlserver

import (
	"context"
	"net"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// BenchmarkShouldRateLimit is one decision of the RateLimitService, in
// the process (no gRPC): what it costs and allocates beyond the network,
// for a descriptor with a bucket per value, over 10,000 values.
//
//	go test -run - -bench ShouldRateLimit -benchmem -cpuprofile cpu.out ./adapters/rlserver
func BenchmarkShouldRateLimit(b *testing.B) {
	cfg, err := parseRLSConfig("bench.yaml", []byte("domain: bench\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: second, requests_per_unit: 1000000}\n"))
	if err != nil {
		b.Fatal(err)
	}
	svc, err := newRLSService(cfg, nil, 1<<20, false, quiet, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer svc.close()
	reqs := make([]*rlspb.RateLimitRequest, 10000)
	for i := range reqs {
		reqs[i] = &rlspb.RateLimitRequest{Domain: "bench", Descriptors: []*rlv3.RateLimitDescriptor{
			{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "tenant", Value: "t" + strconv.Itoa(i)}}}}}
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := svc.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkGRPCDecision is one ShouldRateLimit over gRPC, client and
// server in this process on an in-memory connection: the server as
// gopherpace serve builds it, beside a bare gRPC server whose handler
// answers OK without deciding, so that a profile shows what ours adds to
// gRPC's own cost.
//
//	go test -run - -bench GRPCDecision -benchmem -cpuprofile cpu.out ./adapters/rlserver
func BenchmarkGRPCDecision(b *testing.B) {
	cfg, err := parseRLSConfig("bench.yaml", []byte("domain: bench\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: second, requests_per_unit: 1000000}\n"))
	if err != nil {
		b.Fatal(err)
	}
	svc, err := newRLSService(cfg, nil, 1<<20, false, quiet, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer svc.close()
	ours, _ := newGRPCServer(svc, grpcOptions{log: quiet})
	bare := grpc.NewServer()
	rlspb.RegisterRateLimitServiceServer(bare, noDecision{})
	for _, s := range []struct {
		name string
		srv  *grpc.Server
	}{{"gopherpace", ours}, {"bare gRPC, no decision", bare}} {
		lis := bufconn.Listen(1 << 20)
		go s.srv.Serve(lis)
		conn, err := grpc.NewClient("passthrough:///bench",
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		c := rlspb.NewRateLimitServiceClient(conn)
		req := &rlspb.RateLimitRequest{Domain: "bench", Descriptors: []*rlv3.RateLimitDescriptor{
			{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "tenant", Value: "t1"}}}}}
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.ShouldRateLimit(context.Background(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		conn.Close()
		s.srv.Stop()
	}
}

type noDecision struct {
	rlspb.UnimplementedRateLimitServiceServer
}

func (noDecision) ShouldRateLimit(context.Context, *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	return &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK}, nil
}
