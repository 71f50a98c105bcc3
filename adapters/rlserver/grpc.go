package rlserver

import (
	"context"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// The gRPC listener's bounds: a connection must finish its handshake in
// connectTimeout, an idle one is closed after idleTimeout, a silent one
// after keepaliveTime+keepaliveTimeout; each carries at most maxStreams
// calls at once, and the server decides at most maxInFlight at once (more
// are answered ResourceExhausted at once, not queued).
const (
	connectTimeout   = 5 * time.Second
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 10 * time.Second
	maxStreams       = 64
	maxInFlight      = 4096
	maxRecvBytes     = 4 << 20
)

// newGRPCServer serves the RateLimitService, gRPC health (overall and for
// the RateLimitService, so Kubernetes gRPC probes and Envoy's health
// checks work) and reflection (for grpcurl).
func newGRPCServer(rls *rlsService) (*grpc.Server, *health.Server) {
	g := grpc.NewServer(
		grpc.ConnectionTimeout(connectTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: idleTimeout, Time: keepaliveTime, Timeout: keepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.MaxRecvMsgSize(maxRecvBytes),
		grpc.UnaryInterceptor(boundCalls(maxInFlight)),
	)
	rlspb.RegisterRateLimitServiceServer(g, rls)
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	h.SetServingStatus(rlspb.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, h)
	reflection.Register(g)
	return g, h
}

// boundCalls lets at most n calls run at once: one more is answered
// ResourceExhausted at once, neither queued nor given a goroutine to wait
// in, so a flood costs bounded memory and the callers can back off.
func boundCalls(n int) grpc.UnaryServerInterceptor {
	inFlight := make(chan struct{}, n)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		select {
		case inFlight <- struct{}{}:
		default:
			return nil, status.Error(codes.ResourceExhausted, "too many calls in flight")
		}
		defer func() { <-inFlight }()
		return handler(ctx, req)
	}
}
