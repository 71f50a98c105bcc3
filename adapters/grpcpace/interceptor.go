package grpcpace

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

type interceptor struct {
	l       *gopherpace.Limiter
	cfg     config
	headers headers.Renderer
}

func build(l *gopherpace.Limiter, server bool, opts []Option) (*interceptor, error) {
	if l == nil {
		return nil, errors.New("grpcpace: nil Limiter")
	}
	c := config{key: GlobalKey, headers: headers.None, policy: headers.DefaultPolicy}
	if server {
		c.key = PeerKey
	}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("grpcpace: nil Option")
		}
		o(&c)
	}
	if !server && (c.perRecv || c.perSend) {
		c.require(false, "WithPerMessage applies to server streams only")
	}
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	r, err := headers.New(c.headers, c.policy)
	if err != nil {
		return nil, errors.New("grpcpace: " + err.Error())
	}
	return &interceptor{l: l, cfg: c, headers: r}, nil
}

// check decides one call (or message). It returns nil to go ahead, or the
// status error to return.
func (x *interceptor) check(ctx context.Context, method string, server bool) error {
	c := &x.cfg
	if c.skip != nil && c.skip(ctx, method) {
		return nil
	}
	key, err := c.key(ctx, method)
	if err != nil {
		return x.fail(err)
	}
	cost := int64(1)
	if c.cost != nil {
		cost = c.cost(ctx, method)
	}
	now := time.Now()
	d, err := x.l.TakeAt(now, key, cost)
	if err != nil {
		return x.fail(err)
	}
	if server && c.headers != headers.None {
		x.sendHeaders(ctx, d, now)
	}
	if d.Allowed {
		return nil
	}
	return x.denied(d)
}

func (x *interceptor) fail(err error) error {
	if x.cfg.failOpen {
		return nil
	}
	return status.Error(codes.Unavailable, "rate limiter unavailable: "+err.Error())
}

// denied builds ResourceExhausted with RetryInfo and a QuotaFailure that
// names the policy but never the caller's key.
func (x *interceptor) denied(d gopherpace.Decision) error {
	st := status.New(codes.ResourceExhausted, "rate limit exceeded")
	rate := "unlimited"
	if d.Window > 0 {
		rate = strconv.FormatInt(d.Limit, 10) + " per " + d.Window.String()
	}
	withDetails, err := st.WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(max(d.RetryAfter, time.Millisecond))},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject:     "policy:" + x.cfg.policy,
			Description: "rate limit of " + rate + " exceeded",
		}}},
	)
	if err != nil {
		return st.Err()
	}
	return withDetails.Err()
}

func (x *interceptor) sendHeaders(ctx context.Context, d gopherpace.Decision, now time.Time) {
	var buf [headers.MaxFields]headers.Field
	fields := x.headers.Append(buf[:0], d, now)
	kv := make([]string, 0, 2*len(fields))
	for _, f := range fields {
		kv = append(kv, strings.ToLower(f.Name), f.Value)
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs(kv...))
}

// UnaryServerInterceptor limits unary calls with l.
func UnaryServerInterceptor(l *gopherpace.Limiter, opts ...Option) (grpc.UnaryServerInterceptor, error) {
	x, err := build(l, true, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := x.check(ctx, info.FullMethod, true); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}, nil
}

// StreamServerInterceptor limits streams with l when they open, and, with
// WithPerMessage, each message.
func StreamServerInterceptor(l *gopherpace.Limiter, opts ...Option) (grpc.StreamServerInterceptor, error) {
	x, err := build(l, true, opts)
	if err != nil {
		return nil, err
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := x.check(ss.Context(), info.FullMethod, true); err != nil {
			return err
		}
		if x.cfg.perRecv || x.cfg.perSend {
			ss = &meteredStream{ServerStream: ss, x: x, method: info.FullMethod}
		}
		return handler(srv, ss)
	}, nil
}

// meteredStream spends tokens per message.
type meteredStream struct {
	grpc.ServerStream
	x      *interceptor
	method string
}

func (s *meteredStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil || !s.x.cfg.perRecv {
		return err
	}
	return s.x.check(s.Context(), s.method, false)
}

func (s *meteredStream) SendMsg(m any) error {
	if s.x.cfg.perSend {
		if err := s.x.check(s.Context(), s.method, false); err != nil {
			return err
		}
	}
	return s.ServerStream.SendMsg(m)
}

// UnaryClientInterceptor throttles outgoing unary calls: a denied call
// fails locally with codes.ResourceExhausted and never leaves the process.
func UnaryClientInterceptor(l *gopherpace.Limiter, opts ...Option) (grpc.UnaryClientInterceptor, error) {
	x, err := build(l, false, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		if err := x.check(ctx, method, false); err != nil {
			return err
		}
		return invoker(ctx, method, req, reply, cc, callOpts...)
	}, nil
}

// StreamClientInterceptor throttles opening outgoing streams.
func StreamClientInterceptor(l *gopherpace.Limiter, opts ...Option) (grpc.StreamClientInterceptor, error) {
	x, err := build(l, false, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		if err := x.check(ctx, method, false); err != nil {
			return nil, err
		}
		return streamer(ctx, desc, cc, method, callOpts...)
	}, nil
}
