// Package grpcpace is gRPC interceptors for a gopherpace Limiter,
// standalone or clustered: unary and stream, server and client.
//
//	unary, err := grpcpace.UnaryServerInterceptor(limiter)
//	stream, err := grpcpace.StreamServerInterceptor(limiter)
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))
//
// Server interceptors key calls by the peer's IP address by default (IPv6
// grouped by /64), or by a metadata value, the method, or any function.
// Streams are checked when they open; WithPerMessage also meters each
// message received or sent.
//
// A denial is codes.ResourceExhausted, with a RetryInfo (how long to wait)
// and a QuotaFailure naming the policy, never the caller's key. A limiter
// failure (a key or cost that cannot be worked out) is codes.Unavailable,
// unless WithFailOpen lets the call through.
//
// Client interceptors throttle outgoing calls before they leave the
// process, with the same status on denial.
package grpcpace
