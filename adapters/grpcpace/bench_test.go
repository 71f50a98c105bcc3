package grpcpace

import (
	"context"
	"net"
	"testing"

	"github.com/pedreviljoen/gopherpace/core/conformance"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// BenchmarkUnaryServer calls the interceptor directly, as gRPC does, with
// a no-op handler: the pass-through interceptor is the baseline; grpcpace
// keyed by the caller's address (the default) and with a global key are
// measured on the admit path, without header metadata (the default).
// Beside them, a bare Take of the same key (docs/performance.md#middleware).
// gRPC has no limiter of its own to compare with.
func BenchmarkUnaryServer(b *testing.B) {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 5000}})
	info := &grpc.UnaryServerInfo{FullMethod: "/pkg.Service/Method"}
	handled := 0
	handler := func(context.Context, any) (any, error) { handled++; return nil, nil }
	run := func(b *testing.B, icpt grpc.UnaryServerInterceptor) {
		handled = 0
		b.ReportAllocs()
		loops := 0
		for b.Loop() {
			icpt(ctx, nil, info, handler)
			loops++
		}
		if handled != loops {
			b.Fatalf("%d of %d calls reached the handler", handled, loops)
		}
	}
	b.Run("pass-through", func(b *testing.B) {
		run(b, func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(ctx, req)
		})
	})
	b.Run("take-same-key", func(b *testing.B) { conformance.BenchTake(b, "192.0.2.1") })
	// The floor, a bare Take and grpcpace per peer, call by call batch in
	// turn: the ratio docs/performance.md states.
	b.Run("interleaved", func(b *testing.B) {
		part := func(name string, icpt grpc.UnaryServerInterceptor) conformance.Part {
			return conformance.Part{Name: name, Serve: func() { icpt(ctx, nil, info, handler) }}
		}
		conformance.Interleave(b,
			part("floor", func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				return h(ctx, req)
			}),
			conformance.TakePart(b, "192.0.2.1"),
			part("no-fields", UnaryServerInterceptor(conformance.BenchLimiter(b))),
		)
	})
	b.Run("grpcpace/global", func(b *testing.B) {
		run(b, UnaryServerInterceptor(conformance.BenchLimiter(b), WithKeyFunc(GlobalKey)))
	})
	b.Run("grpcpace/per-ip", func(b *testing.B) {
		run(b, UnaryServerInterceptor(conformance.BenchLimiter(b)))
	})
}
