package rlserver

import (
	"context"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
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
	// A flush reads the counters one by one while requests land, so a
	// name's count may arrive split over several lines: sum them.
	want := map[string]int{
		"ratelimit.service.rate_limit.sd.user.total_hits":   3,
		"ratelimit.service.rate_limit.sd.user.within_limit": 2,
		"ratelimit.service.rate_limit.sd.user.over_limit":   1,
		"ratelimit.service.config_load_success":             1,
	}
	got := map[string]int{}
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(10 * time.Second)
	for !maps.Equal(pick(got, want), want) {
		if time.Now().After(deadline) {
			t.Fatalf("statsd counts after 10 s: %v, want %v", got, want)
		}
		_ = udp.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, _, err := udp.ReadFrom(buf)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			name, rest, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			value, tags, ok := strings.Cut(rest, "|c|")
			if !ok {
				t.Fatalf("not a statsd count: %q", line)
			}
			if tags != "#env:test" {
				t.Fatalf("line %q: tags %q, want #env:test", line, tags)
			}
			v, err := strconv.Atoi(value)
			if err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			got[name] += v
		}
	}
}

// pick is got restricted to want's names.
func pick(got, want map[string]int) map[string]int {
	out := make(map[string]int, len(want))
	for name := range want {
		if v, ok := got[name]; ok {
			out[name] = v
		}
	}
	return out
}
