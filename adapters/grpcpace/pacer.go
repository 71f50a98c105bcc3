package grpcpace

import (
	"context"
	"time"

	"github.com/pedreviljoen/gopherpace/core/pacer"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Pacer slows a gRPC client down to the rate limits of the servers it
// calls, whoever limits them: a call refused with ResourceExhausted and a
// RetryInfo (as these interceptors, Envoy's and Google's APIs refuse) is
// sent again once the RetryInfo's delay has passed, bounded, and later
// calls to the same target wait out that delay before they are sent, so
// the client sends nothing it knows will be refused. Its zero value is
// ready to use, and it is safe for concurrent use.
//
//	var p grpcpace.Pacer
//	conn, err := grpc.NewClient(target, grpc.WithChainUnaryInterceptor(p.Unary()), ...)
//
// A refusal is sent again only when it says it was a rate limit's
// (a QuotaFailure beside the RetryInfo, as these interceptors send), so
// the server never ran the call; RetryUnmarked sends again any
// ResourceExhausted with a RetryInfo.
type Pacer struct {
	// MaxWait is the longest it waits, for one refusal or one target: a
	// refusal that asks for more is returned. 0 is 30 s.
	MaxWait time.Duration
	// MaxRetries is how many times one call is sent again. 0 is 3; a
	// negative number sends nothing again, and only holds later calls.
	MaxRetries int
	// RetryUnmarked sends again refusals without a QuotaFailure.
	RetryUnmarked bool

	pauses pacer.Pauses // by target
}

// Unary is the Pacer as a unary client interceptor.
func (p *Pacer) Unary() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		target := cc.Target()
		if err := p.waitFor(ctx, target); err != nil {
			return err
		}
		for attempt := 0; ; attempt++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			delay, retry := p.refusal(err)
			if delay <= 0 {
				return err
			}
			p.pauses.Hold(target, time.Now().Add(delay))
			if !retry || attempt >= p.retries() || delay > p.maxWait() {
				return err
			}
			if werr := sleepCtx(ctx, delay); werr != nil {
				return status.FromContextError(werr).Err()
			}
		}
	}
}

// Stream is the Pacer as a stream client interceptor: a stream waits out
// its target's pause before it opens, and one refused as it opens is
// opened again; refusals of its messages are the caller's to handle.
func (p *Pacer) Stream() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		target := cc.Target()
		if err := p.waitFor(ctx, target); err != nil {
			return nil, err
		}
		for attempt := 0; ; attempt++ {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			delay, retry := p.refusal(err)
			if delay <= 0 {
				return cs, err
			}
			p.pauses.Hold(target, time.Now().Add(delay))
			if !retry || attempt >= p.retries() || delay > p.maxWait() {
				return cs, err
			}
			if werr := sleepCtx(ctx, delay); werr != nil {
				return nil, status.FromContextError(werr).Err()
			}
		}
	}
}

// refusal reads a rate limit's refusal: the delay it asks for (0 when err
// is none), and whether the call may be sent again.
func (p *Pacer) refusal(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if err == nil || !ok || st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	var delay time.Duration
	marked := false
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			delay = d.GetRetryDelay().AsDuration()
		case *errdetails.QuotaFailure:
			marked = true
		}
	}
	return max(delay, 0), marked || p.RetryUnmarked
}

func (p *Pacer) retries() int {
	if p.MaxRetries == 0 {
		return 3
	}
	return p.MaxRetries
}

func (p *Pacer) maxWait() time.Duration {
	if p.MaxWait > 0 {
		return p.MaxWait
	}
	return 30 * time.Second
}

// waitFor waits out target's pause, at most MaxWait.
func (p *Pacer) waitFor(ctx context.Context, target string) error {
	if err := p.pauses.Wait(ctx, target, p.maxWait()); err != nil {
		return status.FromContextError(err).Err()
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
