package rlserver

import (
	"context"
	"crypto/tls"
	"log/slog"
	"slices"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/pedreviljoen/gopherpace/adapters/memberpace"
	"github.com/pedreviljoen/gopherpace/core/connlimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The gRPC listener's bounds: a connection must finish its handshake in
// connectTimeout, and a call must send its first message within
// firstMessageTimeout; an idle connection is closed after idleTimeout, a
// silent one after keepaliveTime+keepaliveTimeout; each carries at most
// maxStreams calls at once, and the server decides at most maxInFlight at
// once (more are answered ResourceExhausted at once, not queued).
const (
	connectTimeout      = 5 * time.Second
	firstMessageTimeout = 5 * time.Second
	keepaliveTime       = 30 * time.Second
	keepaliveTimeout    = 10 * time.Second
	maxStreams          = 64
	maxInFlight         = 4096
	maxRecvBytes        = 4 << 20
)

// grpcOptions are newGRPCServer's choices beyond the RateLimitService.
type grpcOptions struct {
	conns      *connlimit.Listener // told which connections carry calls; nil: none
	reflection bool                // serve gRPC reflection, for grpcurl
	tls        *tls.Config         // nil: plaintext
	log        *slog.Logger
	metrics    *serviceMetrics
}

// newGRPCServer serves the RateLimitService, gRPC health (overall and for
// the RateLimitService, so Kubernetes gRPC probes and Envoy's health
// checks work) and, when asked, reflection (for grpcurl).
func newGRPCServer(rls *rlsService, o grpcOptions) (*grpc.Server, *health.Server) {
	calls := &callGuard{log: o.log, metrics: o.metrics}
	if o.conns != nil {
		calls.started = o.conns.CallStarted
	}
	var creds []grpc.ServerOption
	if o.tls != nil {
		creds = append(creds, grpc.Creds(credentials.NewTLS(o.tls)))
	}
	g := grpc.NewServer(append(creds,
		grpc.ConnectionTimeout(connectTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: idleTimeout, Time: keepaliveTime, Timeout: keepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.MaxRecvMsgSize(maxRecvBytes),
		grpc.InTapHandle(calls.tap),
		grpc.ForceServerCodecV2(lenientCodec{encoding.GetCodecV2(protoenc.Name)}),
		grpc.ChainUnaryInterceptor(firstMessageUnary, boundCalls(maxInFlight)),
		grpc.StreamInterceptor(firstMessageStream),
	)...)
	g.RegisterService(rateLimitServiceDesc(), rls)
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	h.SetServingStatus(rlspb.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, h)
	if o.reflection {
		reflection.Register(g)
	}
	return g, h
}

// rateLimitServiceDesc is the RateLimitService's, but for the decoding of
// a call's message: bytes that are no RateLimitRequest are the caller's
// mistake, answered InvalidArgument and counted as invalid, where gRPC
// answers Internal (its stream writes that status itself when decoding
// fails) and nothing counts them. So the server's codec (lenientCodec) hands
// this method its message's bytes, and the handler decodes them.
func rateLimitServiceDesc() *grpc.ServiceDesc {
	desc := rlspb.RateLimitService_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	for i := range desc.Methods {
		if desc.Methods[i].MethodName == "ShouldRateLimit" {
			desc.Methods[i].Handler = shouldRateLimit
		}
	}
	return &desc
}

func shouldRateLimit(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	s := srv.(*rlsService)
	var raw rawMessage
	if err := dec(&raw); err != nil {
		return nil, err
	}
	in := new(rlspb.RateLimitRequest)
	if err := proto.Unmarshal(raw, in); err != nil {
		s.metrics.count(outcomeBadRequest)
		return nil, status.Errorf(codes.InvalidArgument, "the message is not a RateLimitRequest: %v", err)
	}
	if interceptor == nil {
		return s.ShouldRateLimit(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: rlspb.RateLimitService_ShouldRateLimit_FullMethodName}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return s.ShouldRateLimit(ctx, req.(*rlspb.RateLimitRequest))
	})
}

// rawMessage is a message's bytes, undecoded.
type rawMessage []byte

// lenientCodec is gRPC's proto codec, but a rawMessage gets the bytes as
// they came.
type lenientCodec struct{ encoding.CodecV2 }

func (c lenientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawMessage); ok {
		*r = data.Materialize()
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// joinCheckEvery is how often gRPC health follows the transport's word on
// whether the cluster refuses this replica.
const joinCheckEvery = time.Second

// watchJoin keeps gRPC health NOT_SERVING while the cluster refuses this
// replica (memberpace's JoinError), as /readyz is 503 then (status.Ready),
// until ctx ends.
func watchJoin(ctx context.Context, t *memberpace.Transport, h *health.Server) {
	tick := time.NewTicker(joinCheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			setHealth(h, t.JoinError())
		}
	}
}

func setHealth(h *health.Server, refused error) {
	st := healthpb.HealthCheckResponse_SERVING
	if refused != nil {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	h.SetServingStatus("", st)
	h.SetServingStatus(rlspb.RateLimitService_ServiceDesc.ServiceName, st)
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
