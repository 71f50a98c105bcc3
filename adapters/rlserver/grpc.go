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
		grpc.UnaryInterceptor(unaryCalls(maxInFlight)),
		grpc.StreamInterceptor(firstMessageStream),
	)...)
	g.RegisterService(rateLimitServiceDesc(), newRLSOverGRPC(rls))
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
// fails) and nothing counts them. So the server's codec (lenientCodec)
// hands this method the request decoded or the reason it is not, and the
// handler answers the reason.
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

// rlsOverGRPC is the service as gRPC calls it, with what the interceptor
// is handed for each call made once, not per call.
type rlsOverGRPC struct {
	*rlsService
	info   grpc.UnaryServerInfo
	handle grpc.UnaryHandler
}

func newRLSOverGRPC(s *rlsService) *rlsOverGRPC {
	g := &rlsOverGRPC{rlsService: s}
	g.info = grpc.UnaryServerInfo{Server: g, FullMethod: rlspb.RateLimitService_ShouldRateLimit_FullMethodName}
	g.handle = func(ctx context.Context, req any) (any, error) {
		return s.ShouldRateLimit(ctx, req.(*rlspb.RateLimitRequest))
	}
	return g
}

func shouldRateLimit(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	s := srv.(*rlsOverGRPC)
	var d decodedRequest
	if err := dec(&d); err != nil {
		return nil, err
	}
	if d.err != nil {
		s.metrics.count(outcomeBadRequest)
		return nil, status.Errorf(codes.InvalidArgument, "the message is not a RateLimitRequest: %v", d.err)
	}
	in := d.req
	if interceptor == nil {
		return s.ShouldRateLimit(ctx, in)
	}
	return interceptor(ctx, in, &s.info, s.handle)
}

// decodedRequest is a call's RateLimitRequest as the codec decoded it,
// or why it could not.
type decodedRequest struct {
	req *rlspb.RateLimitRequest
	err error
}

// lenientCodec is gRPC's proto codec, but a decodedRequest never fails
// to decode: it keeps the error for the handler.
type lenientCodec struct{ encoding.CodecV2 }

func (c lenientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if d, ok := v.(*decodedRequest); ok {
		// As gRPC's codec reads: one buffer from its pool, given back.
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		d.req = new(rlspb.RateLimitRequest)
		d.err = proto.Unmarshal(buf.ReadOnlyData(), d.req)
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

// unaryCalls is the server's one unary interceptor (one, so that gRPC
// builds no chain of handlers per call). It runs once a call's message
// has arrived: it tells the call guard so, and ends the call for the
// connection cap when its handler returns (callguard.go); and it lets at
// most n calls run at once: one more is answered ResourceExhausted at
// once, neither queued nor given a goroutine to wait in, so a flood costs
// bounded memory and the callers can back off.
func unaryCalls(n int) grpc.UnaryServerInterceptor {
	inFlight := make(chan struct{}, n)
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if c := firstMessageArrived(ctx); c != nil {
			defer c.end()
		}
		select {
		case inFlight <- struct{}{}:
		default:
			return nil, status.Error(codes.ResourceExhausted, "too many calls in flight")
		}
		defer func() { <-inFlight }()
		return handler(ctx, req)
	}
}
