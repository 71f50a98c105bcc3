package grpcpace

import (
	"context"
	"errors"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// BuildConcurrency returns a server's interceptors that cap the calls it
// handles at once with f, across the cluster when f is clustered. A call
// beyond the cap fails at once with ResourceExhausted (RetryInfo: 1 s); a
// call let in holds a slot until its handler returns, a stream's until it
// ends. key names a call's slots (nil: every call shares f's keyless
// limit; MethodKey caps each method apart). Chain them after the rate's
// interceptors, so that a call the rate refuses takes no slot.
func BuildConcurrency(f *gopherpace.InFlight, key KeyFunc) (ServerInterceptors, error) {
	if f == nil {
		return ServerInterceptors{}, errors.New("grpcpace: BuildConcurrency(nil): pass an in-flight limit, such as gopherpace.NewInFlight's")
	}
	c := concurrency{f, key}
	return ServerInterceptors{Unary: c.unary, Stream: c.stream}, nil
}

type concurrency struct {
	f   *gopherpace.InFlight
	key KeyFunc
}

// slotRetry is a refused call's RetryInfo: when a slot frees cannot be
// foreseen, and a second is longer than most calls hold one.
const slotRetry = time.Second

func (c concurrency) acquire(ctx context.Context, method string) (release func(), err error) {
	k := ""
	if c.key != nil {
		if k, err = c.key(ctx, method); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	release, ok := c.f.TryAcquire(k)
	if ok {
		return release, nil
	}
	st := status.New(codes.ResourceExhausted, "too many calls in flight")
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(slotRetry)}); err == nil {
		st = d
	}
	return nil, st.Err()
}

func (c concurrency) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	release, err := c.acquire(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	defer release()
	return handler(ctx, req)
}

func (c concurrency) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	release, err := c.acquire(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	defer release()
	return handler(srv, ss)
}
