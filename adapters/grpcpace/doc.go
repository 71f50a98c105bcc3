// Package grpcpace is gRPC interceptors for a gopherpace Limiter,
// standalone or clustered: unary and stream, server and client, used
// inline as go-grpc-middleware's are:
//
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(grpcpace.UnaryServerInterceptor(limiter)),
//		grpc.ChainStreamInterceptor(grpcpace.StreamServerInterceptor(limiter)),
//	)
//
// The inline constructors panic on an invalid option; BuildServer and
// BuildClient return the error instead.
//
// Server interceptors key calls by the caller's IP address by default
// (IPv6 grouped by /64). Behind an L7 proxy, WithTrustedProxies reads the
// caller from the x-forwarded-for metadata the proxy sets, walked from the
// right. Calls can also be keyed by a metadata value, the method, or any
// function. Streams are checked when they open; WithPerMessage also meters
// each message received or sent.
//
// A denial is codes.ResourceExhausted, with a RetryInfo (how long to wait)
// and a QuotaFailure naming the policy and its rate, never the caller's
// key. A call that retrying cannot help (no key, a cost out of range) is
// codes.InvalidArgument; the server's own faults are codes.Internal,
// unless WithFailOpen lets the call through.
//
// Client interceptors throttle outgoing calls before they leave the
// process, with the same status on denial.
package grpcpace
