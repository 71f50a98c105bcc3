package grpcpace_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/netip"

	"github.com/pedreviljoen/gopherpace/adapters/grpcpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// One bucket per method, 10 calls a second, one at a time, inline.
func ExampleUnaryServerInterceptor() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(1))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		grpcpace.UnaryServerInterceptor(limiter, grpcpace.WithKeyFunc(grpcpace.MethodKey)),
	))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for range 2 {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		fmt.Println(status.Code(err))
	}
	// Output:
	// OK
	// ResourceExhausted
}

// Behind an Envoy in 10.0.0.0/8 that names callers in x-forwarded-for,
// key by the caller it names. BuildServer returns configuration errors
// instead of panicking.
func ExampleBuildServer() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(100), gopherpace.WithBucketSize(100))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	icpt, err := grpcpace.BuildServer(limiter, grpcpace.WithTrustedProxies(netip.MustParsePrefix("10.0.0.0/8")))
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(icpt.Unary), grpc.ChainStreamInterceptor(icpt.Stream))
	defer srv.Stop()

	_, err = grpcpace.BuildServer(limiter, grpcpace.WithKeyFunc(nil))
	fmt.Println(err)
	// Output:
	// grpcpace: nil KeyFunc
}

// A client of a server limited to 20 calls a second: with a Pacer, its
// calls wait out the refusals' RetryInfo instead of failing.
func ExamplePacer() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(20), gopherpace.WithBucketSize(1))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcpace.UnaryServerInterceptor(limiter, grpcpace.WithKeyFunc(grpcpace.GlobalKey))))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	defer srv.Stop()

	var pacer grpcpace.Pacer
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(pacer.Unary()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for range 4 {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		fmt.Print(status.Code(err), " ")
	}
	// Output: OK OK OK OK
}

// At most 100 calls in the handlers at once, per method, after a rate of
// 1,000 calls a second: the rate's interceptors first, so that a call the
// rate refuses takes no slot.
func ExampleBuildConcurrency() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(1000))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	inFlight, err := gopherpace.NewInFlight(100)
	if err != nil {
		log.Fatal(err)
	}
	defer inFlight.Close()

	rate, err := grpcpace.BuildServer(limiter)
	if err != nil {
		log.Fatal(err)
	}
	slots, err := grpcpace.BuildConcurrency(inFlight, grpcpace.MethodKey)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(rate.Unary, slots.Unary), grpc.ChainStreamInterceptor(rate.Stream, slots.Stream))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	own, _ := inFlight.Count("/grpc.health.v1.Health/Check")
	fmt.Println(status.Code(err), own)
	// Output:
	// OK 0
}
