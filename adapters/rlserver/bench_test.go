package rlserver

import (
	"context"
	"strconv"
	"testing"

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
