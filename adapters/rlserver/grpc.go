package rlserver

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
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
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
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
	calls := &callGuard{conns: o.conns, log: o.log, metrics: o.metrics}
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

// errNoFirstMessage ends a call that sent no message in time.
var errNoFirstMessage = errors.New("no request message within " + firstMessageTimeout.String())

// callGuard sees every call as its stream opens, before any message: it
// tells the connection cap that the call's connection is busy until the
// call ends, and ends a call that sends no message within
// firstMessageTimeout. A stream that never sends is otherwise held for
// as long as its client likes: gRPC's own limits count it neither idle
// nor in flight.
type callGuard struct {
	conns   *connlimit.Listener
	log     *slog.Logger
	metrics *serviceMetrics

	silent   atomic.Uint64 // calls ended for sending nothing
	lastWarn atomic.Int64
}

type firstMessageKey struct{}

func (g *callGuard) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	done := func() {}
	if p, ok := peer.FromContext(ctx); ok && g.conns != nil {
		done = g.conns.CallStarted(p.Addr)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(firstMessageTimeout, func() {
		cancel(errNoFirstMessage)
		g.ended()
	})
	// The stream's context ends with the call, whichever way it ends.
	context.AfterFunc(ctx, func() {
		timer.Stop()
		done()
	})
	return context.WithValue(ctx, firstMessageKey{}, timer), nil
}

// ended counts a call ended for its silence, and says so at most every
// logEvery.
func (g *callGuard) ended() {
	n := g.silent.Add(1)
	g.metrics.silentCall()
	if g.log == nil {
		return
	}
	now := time.Now().UnixNano()
	last := g.lastWarn.Load()
	if last != 0 && now-last < int64(logEvery) || !g.lastWarn.CompareAndSwap(last, now) {
		return
	}
	g.log.Warn("gRPC calls that sent no request message were ended", "after", firstMessageTimeout, "ended so far", n)
}

// firstMessageArrived stops the call's first-message timer.
func firstMessageArrived(ctx context.Context) {
	if t, ok := ctx.Value(firstMessageKey{}).(*time.Timer); ok {
		t.Stop()
	}
}

// firstMessageUnary runs once a unary call's message has arrived.
func firstMessageUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	firstMessageArrived(ctx)
	return handler(ctx, req)
}

// firstMessageStream stops the timer at a stream's first message.
func firstMessageStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &firstMessageWatch{ServerStream: ss})
}

type firstMessageWatch struct {
	grpc.ServerStream
	seen bool
}

func (w *firstMessageWatch) RecvMsg(m any) error {
	err := w.ServerStream.RecvMsg(m)
	if err == nil && !w.seen {
		w.seen = true
		firstMessageArrived(w.Context())
	}
	return err
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
