package rlserver

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// With -statsd the server pushes envoyproxy/ratelimit's stats, under its
// names, to a statsd server: here a UDP socket on loopback.
func TestStatsdUnderThePeersNames(t *testing.T) {
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	config := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(config, []byte("domain: sd\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, grpcAddr := runServer(t, "-config", config, "-statsd", udp.LocalAddr().String(), "-stats-flush", "50ms",
		"-dogstatsd", "-statsd-tags", "env:test")
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := rlspb.NewRateLimitServiceClient(conn)
	for range 3 { // 2 within the limit, 1 over
		if _, err := c.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "sd",
			Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "user", Value: "u1"}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]bool{
		"ratelimit.service.rate_limit.sd.user.total_hits:3|c|#env:test":   false,
		"ratelimit.service.rate_limit.sd.user.within_limit:2|c|#env:test": false,
		"ratelimit.service.rate_limit.sd.user.over_limit:1|c|#env:test":   false,
		"ratelimit.service.config_load_success:1|c|#env:test":             false,
	}
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(10 * time.Second)
	for missing := len(want); missing > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("statsd lines not seen in 10 s: %v", want)
		}
		_ = udp.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, _, err := udp.ReadFrom(buf)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			if seen, ok := want[line]; ok && !seen {
				want[line] = true
				missing--
			}
		}
	}
}
