package rlsclient_test

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/pedreviljoen/gopherpace/adapters/rlserver/rlsclient"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
)

// service answers OK its first n calls, then OVER_LIMIT with a reset of
// reset; slow delays every answer.
type service struct {
	rlspb.UnimplementedRateLimitServiceServer
	n     int64
	reset time.Duration
	slow  time.Duration
	calls atomic.Int64
}

func (s *service) ShouldRateLimit(ctx context.Context, _ *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	if s.calls.Add(1) <= s.n {
		return &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK}, nil
	}
	select {
	case <-time.After(s.slow):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OVER_LIMIT, Statuses: []*rlspb.RateLimitResponse_DescriptorStatus{
		{Code: rlspb.RateLimitResponse_OVER_LIMIT, DurationUntilReset: durationpb.New(s.reset)}}}, nil
}

func serve(t *testing.T, s *service) *grpc.ClientConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rlspb.RegisterRateLimitServiceServer(srv, s)
	go srv.Serve(ln)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop() })
	return conn
}

// Allowed, then refused; the refusal is cached until its reset, and
// another descriptor is asked for.
func TestCheckAndTheDeniedCache(t *testing.T) {
	s := &service{n: 1, reset: time.Hour}
	c := rlsclient.New(serve(t, s), "edge")
	ip := rlsclient.Descriptor("remote_address", "10.0.0.1")
	if r := c.Check(t.Context(), rlsclient.FailClosed, ip); !r.Allowed || r.Err != nil {
		t.Fatalf("first: %+v", r)
	}
	if r := c.Check(t.Context(), rlsclient.FailOpen, ip); r.Allowed || r.Cached || r.RetryAfter != time.Hour {
		t.Fatalf("second: %+v", r)
	}
	for range 50 {
		if r := c.Check(t.Context(), rlsclient.FailOpen, ip); r.Allowed || !r.Cached {
			t.Fatalf("a refused descriptor asked again: %+v", r)
		}
	}
	if s.calls.Load() != 2 {
		t.Fatalf("%d calls reached the service", s.calls.Load())
	}
	c.Check(t.Context(), rlsclient.FailOpen, rlsclient.Descriptor("remote_address", "10.0.0.2"))
	if s.calls.Load() != 3 {
		t.Fatal("another descriptor was answered from the cache")
	}
}

// A slow or absent service: the FailMode answers, within the timeout.
func TestFailModes(t *testing.T) {
	c := rlsclient.New(serve(t, &service{slow: time.Second}), "edge").WithTimeout(50 * time.Millisecond)
	for _, mode := range []rlsclient.FailMode{rlsclient.FailOpen, rlsclient.FailClosed} {
		start := time.Now()
		r := c.Check(t.Context(), mode, rlsclient.Descriptor("k", "v"))
		if r.Err == nil || r.Allowed != (mode == rlsclient.FailOpen) || time.Since(start) > 900*time.Millisecond {
			t.Fatalf("mode %d: %+v after %v", mode, r, time.Since(start))
		}
	}
	if r := c.Check(t.Context(), 0, rlsclient.Descriptor("k", "v")); r.Allowed || r.Err == nil {
		t.Fatalf("no FailMode: %+v", r)
	}
}

// A client and the one WithTimeout derives from it share one cache, each
// from its own goroutines: a refusal either learns spares both the round
// trip, and the race detector sees one lock guarding it.
func TestDerivedClientsShareTheCache(t *testing.T) {
	s := &service{n: 0, reset: time.Hour}
	parent := rlsclient.New(serve(t, s), "edge")
	child := parent.WithTimeout(time.Second)
	var wg sync.WaitGroup
	for i := range 8 {
		c := parent
		if i%2 == 1 {
			c = child
		}
		wg.Go(func() {
			for j := range 50 {
				c.Check(t.Context(), rlsclient.FailClosed, rlsclient.Descriptor("user", strconv.Itoa(i*50+j)))
			}
		})
	}
	wg.Wait()
	asked := s.calls.Load()
	key := rlsclient.Descriptor("user", "7")
	if r := parent.Check(t.Context(), rlsclient.FailClosed, key); !r.Cached {
		t.Fatalf("the parent asked again for a key its child was refused: %+v", r)
	}
	if r := child.Check(t.Context(), rlsclient.FailClosed, rlsclient.Descriptor("user", "0")); !r.Cached {
		t.Fatalf("the child asked again for a key its parent was refused: %+v", r)
	}
	if s.calls.Load() != asked {
		t.Fatalf("%d round trips for cached refusals", s.calls.Load()-asked)
	}
}
