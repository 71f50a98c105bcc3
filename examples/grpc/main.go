// Command grpc runs a gRPC health server limited per peer by grpcpace, and
// a client that calls it in a burst and prints each status and retry delay.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"time"

	"github.com/pedreviljoen/gopherpace/adapters/grpcpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "listen address")
	flag.Parse()
	if err := run(*addr, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(addr string, out io.Writer) error {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(5), gopherpace.WithBucketSize(3))
	if err != nil {
		return err
	}
	defer limiter.Close()
	// A stricter limit on one method: its own limiter, skipping the others.
	login, err := gopherpace.New(gopherpace.WithRate(5, time.Minute))
	if err != nil {
		return err
	}
	defer login.Close()
	const loginMethod = "/auth.v1.Auth/Login"
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		grpcpace.UnaryServerInterceptor(limiter, grpcpace.WithPolicyName("per-peer")),
		grpcpace.UnaryServerInterceptor(login, grpcpace.WithPolicyName("login"),
			grpcpace.WithSkip(func(_ context.Context, method string) bool { return method != loginMethod })),
	))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go srv.Serve(ln)
	defer srv.Stop()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for i := 1; i <= 5; i++ {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		st := status.Convert(err)
		line := fmt.Sprintf("call %d: %s", i, st.Code())
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				line += fmt.Sprintf("  retry after %v", ri.RetryDelay.AsDuration().Round(1e6))
			}
		}
		fmt.Fprintln(out, line)
	}
	return nil
}
