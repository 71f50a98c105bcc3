package grpcpace

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

type interceptor struct {
	gate    *adapter.Gate
	flow    *adapter.Flow[rpc]
	cfg     config
	server  bool
	headers bool // server interceptors send header metadata
	waits   bool // a client that waits for its tokens (WithWait)
	bare    bool // an admitted call carries nothing: no fields, Decision in the context or refund
}

// An rpc is what the flow reads a call by: its context and method.
type rpc struct {
	ctx    context.Context
	method string
}

func build(l *gopherpace.Limiter, server bool, opts []Option) (*interceptor, error) {
	// gRPC's default is no header metadata: it costs allocations per call.
	var c config
	c.Share(adapter.Headers(headers.None))
	if !server {
		c.key = GlobalKey
	}
	adapter.Apply(&c, opts, c.Require)
	if c.wait && server {
		c.Require(false, "WithWait applies to client interceptors (BuildClient): a server cannot make its caller wait; leave it out here")
	}
	if c.wait && len(c.also) > 0 {
		c.Require(false, "WithWait waits for one limit: leave out WithAlso")
	}
	g, err := c.Gate(l, "grpcpace")
	if err != nil {
		return nil, err
	}
	if c.wait && g.Shapes() {
		return nil, errors.New("grpcpace: WithWait and WithMaxDelay both make calls wait: keep one")
	}
	h := adapter.Hooks[rpc]{Key: callFunc(c.key), Peer: callPeer, Forwarded: callForwarded, NamedPeers: true,
		Context: func(c rpc) context.Context { return c.ctx }}
	for _, k := range c.also {
		h.Also = append(h.Also, callFunc(k))
	}
	if c.cost != nil {
		cost := c.cost
		h.Cost = func(c rpc) int64 { return cost(c.ctx, c.method) }
	}
	if c.skip != nil {
		skip := c.skip
		h.Skip = func(c rpc) bool { return skip(c.ctx, c.method) }
	}
	flow, err := adapter.NewFlow(g, h)
	if err != nil {
		return nil, fmt.Errorf("grpcpace: %w", err)
	}
	x := &interceptor{gate: g, flow: flow, cfg: c, server: server}
	x.headers = server && g.AdmitsHaveFields()
	x.waits = c.wait && !server
	x.bare = !x.headers && !(g.DecisionInContext() && server) && c.refund == nil && c.usage == nil
	return x, nil
}

// callFunc is a KeyFunc over a call; nil stays nil (the default key).
func callFunc(k KeyFunc) func(rpc) (string, error) {
	if k == nil {
		return nil
	}
	return func(c rpc) (string, error) { return k(c.ctx, c.method) }
}

// callPeer is the caller's address; a peer that is not IP (a Unix socket,
// bufconn) is keyed by its address string (Hooks.NamedPeers).
func callPeer(c rpc) (netip.Addr, string) {
	p, ok := peer.FromContext(c.ctx)
	if !ok {
		return netip.Addr{}, ""
	}
	return adapter.AddrPeer(p.Addr)
}

// callForwarded reads the forwarding metadata of a call from a trusted
// proxy.
func callForwarded(c rpc) ([]string, string) {
	real := ""
	if v := metadata.ValueFromIncomingContext(c.ctx, "x-real-ip"); len(v) > 0 {
		real = v[0]
	}
	return metadata.ValueFromIncomingContext(c.ctx, "x-forwarded-for"), real
}

// check decides one call or message. It returns nil to go ahead, or the
// status error to fail with; for an admitted call it also returns the
// context for the handler, and, when refunds are on, the request to settle
// when the call ends.
func (x *interceptor) check(ctx context.Context, method string, perMessage bool) (context.Context, *adapter.Request, error) {
	if x.waits && !perMessage {
		return ctx, nil, x.prepareAndWait(ctx, method)
	}
	var req adapter.Request
	step := x.flow.Decide(rpc{ctx, method}, &req)
	if step == adapter.Skip || step == adapter.Admit && (perMessage || x.bare) {
		// Fields, the Decision in the context and refunds are per call,
		// not per message; most servers use none of them.
		return ctx, nil, nil
	}
	return x.decided(ctx, method, perMessage, step, &req)
}

// decided answers a call the flow failed or denied, or an admitted call
// that carries more than the limiter's yes (see admitted).
func (x *interceptor) decided(ctx context.Context, method string, perMessage bool, step adapter.Step, req *adapter.Request) (context.Context, *adapter.Request, error) {
	switch step {
	case adapter.Admit:
		return x.admitted(ctx, req)
	case adapter.Fail:
		return ctx, nil, x.fail(req.Err())
	}
	if x.headers && !perMessage {
		x.sendHeaders(ctx, req)
	}
	d := req.Decision()
	if x.cfg.deny != nil {
		// nil would let the denied call through: it gets the default
		// denial instead.
		if err := x.cfg.deny(ctx, method, d); err != nil {
			return ctx, nil, err
		}
	}
	return ctx, nil, denied(d, x.gate.DeniedBy(req))
}

// admitted is what an admitted call carries beyond the limiter: its
// fields, its Decision in the context, and its refund.
func (x *interceptor) admitted(ctx context.Context, req *adapter.Request) (context.Context, *adapter.Request, error) {
	if x.headers {
		x.sendHeaders(ctx, req)
	}
	d := req.Decision()
	if x.gate.DecisionInContext() && x.server {
		ctx = context.WithValue(ctx, decisionKey{}, d)
	}
	if (x.cfg.refund != nil || x.cfg.usage != nil) && !d.Shadowed {
		settle := *req // escapes only when refunds or usage are on
		return ctx, &settle, nil
	}
	return ctx, nil, nil
}

// prepareAndWait spends a waiting client's call from the limiter.
func (x *interceptor) prepareAndWait(ctx context.Context, method string) error {
	var req adapter.Request
	switch x.flow.Prepare(rpc{ctx, method}, &req) {
	case adapter.Skip:
		return nil
	case adapter.Fail:
		return x.fail(req.Err())
	}
	return x.wait(ctx, &req)
}

// wait spends the call's tokens from the limiter, waiting for them as
// Limiter.Wait does (a client with WithWait; one limit only).
func (x *interceptor) wait(ctx context.Context, req *adapter.Request) error {
	err := x.gate.Limiter().Wait(ctx, req.Key(0), req.Cost)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gopherpace.ErrWaitTooLong):
		return status.Error(codes.ResourceExhausted, adapter.DeniedMessage+": "+err.Error())
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	}
	return x.fail(err)
}

// fail is the status for an error from a key function or the limiter:
// InvalidArgument for the call's own faults (retrying cannot help), and
// Internal, or nothing under WithFailOpen, for the rest; the messages
// are every adapter's (adapter.Answer).
func (x *interceptor) fail(err error) error {
	_, msg := adapter.Answer(err)
	if adapter.ClientFault(err) {
		return status.Error(codes.InvalidArgument, msg)
	}
	if x.cfg.failOpen {
		return nil
	}
	return status.Error(codes.Internal, msg)
}

// finish settles an admitted call when it ends: it gives back what it
// spent when the refund func picks the code it ended with, and charges
// what it used (WithUsage).
func (x *interceptor) finish(req *adapter.Request, ctx context.Context, method string, resp any, err error) {
	if req == nil {
		return
	}
	if x.cfg.refund != nil && x.cfg.refund(status.Code(err)) {
		x.gate.GiveBack(req)
	}
	if x.cfg.usage != nil {
		x.gate.Settle(req, x.cfg.usage(ctx, method, resp, err))
	}
}

type decisionKey struct{}

// FromContext returns the Decision made for the call whose handler context
// this is, when the server interceptor runs WithDecisionInContext.
func FromContext(ctx context.Context) (gopherpace.Decision, bool) {
	d, ok := ctx.Value(decisionKey{}).(gopherpace.Decision)
	return d, ok
}

// UnaryServerInterceptor limits unary calls with l, for inline use:
//
//	grpc.NewServer(grpc.ChainUnaryInterceptor(grpcpace.UnaryServerInterceptor(limiter)))
//
// It panics on a nil Limiter or an invalid option; BuildServer returns the
// error instead.
func UnaryServerInterceptor(l *gopherpace.Limiter, opts ...Option) grpc.UnaryServerInterceptor {
	return adapter.Must(BuildServer(l, opts...)).Unary
}

// StreamServerInterceptor limits streams with l when they open, and, with
// WithPerMessage, each message. It panics as UnaryServerInterceptor does.
func StreamServerInterceptor(l *gopherpace.Limiter, opts ...Option) grpc.StreamServerInterceptor {
	return adapter.Must(BuildServer(l, opts...)).Stream
}

// UnaryClientInterceptor throttles outgoing unary calls: a denied call
// fails locally with codes.ResourceExhausted and never leaves the process.
// It panics on a nil Limiter or an invalid option; BuildClient returns the
// error instead.
func UnaryClientInterceptor(l *gopherpace.Limiter, opts ...Option) grpc.UnaryClientInterceptor {
	return adapter.Must(BuildClient(l, opts...)).Unary
}

// StreamClientInterceptor throttles opening outgoing streams. It panics as
// UnaryClientInterceptor does.
func StreamClientInterceptor(l *gopherpace.Limiter, opts ...Option) grpc.StreamClientInterceptor {
	return adapter.Must(BuildClient(l, opts...)).Stream
}

// ServerInterceptors are a server's unary and stream interceptors for one
// limiter and one set of options.
type ServerInterceptors struct {
	Unary  grpc.UnaryServerInterceptor
	Stream grpc.StreamServerInterceptor
}

// BuildServer returns the server interceptors for l, or an error naming
// every invalid option.
func BuildServer(l *gopherpace.Limiter, opts ...Option) (ServerInterceptors, error) {
	x, err := build(l, true, opts)
	if err != nil {
		return ServerInterceptors{}, err
	}
	return ServerInterceptors{Unary: x.unaryServer, Stream: x.streamServer}, nil
}

// ClientInterceptors are a client's unary and stream interceptors for one
// limiter and one set of options.
type ClientInterceptors struct {
	Unary  grpc.UnaryClientInterceptor
	Stream grpc.StreamClientInterceptor
}

// BuildClient returns the client interceptors for l, or an error naming
// every invalid option.
func BuildClient(l *gopherpace.Limiter, opts ...Option) (ClientInterceptors, error) {
	x, err := build(l, false, opts)
	if err != nil {
		return ClientInterceptors{}, err
	}
	return ClientInterceptors{Unary: x.unaryClient, Stream: x.streamClient}, nil
}

// unaryServer is check for a server's call (a server never waits), with
// the common admit (nothing to carry) a straight line to the handler.
func (x *interceptor) unaryServer(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	var r adapter.Request
	step := x.flow.Decide(rpc{ctx, info.FullMethod}, &r)
	if step == adapter.Skip || step == adapter.Admit && x.bare {
		return handler(ctx, req)
	}
	ctx, spent, err := x.decided(ctx, info.FullMethod, false, step, &r)
	if err != nil {
		return nil, err
	}
	resp, err := handler(ctx, req)
	x.finish(spent, ctx, info.FullMethod, resp, err)
	return resp, err
}

func (x *interceptor) streamServer(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, spent, err := x.check(ss.Context(), info.FullMethod, false)
	if err != nil {
		return err
	}
	if x.cfg.perRecv || x.cfg.perSend || ctx != ss.Context() {
		ss = &meteredStream{ServerStream: ss, x: x, method: info.FullMethod, ctx: ctx}
	}
	err = handler(srv, ss)
	x.finish(spent, ctx, info.FullMethod, nil, err)
	return err
}

// meteredStream spends tokens per message, and carries the handler's
// context.
type meteredStream struct {
	grpc.ServerStream
	x      *interceptor
	method string
	ctx    context.Context
}

func (s *meteredStream) Context() context.Context { return s.ctx }

func (s *meteredStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil || !s.x.cfg.perRecv {
		return err
	}
	_, _, err := s.x.check(s.ctx, s.method, true)
	return err
}

func (s *meteredStream) SendMsg(m any) error {
	if s.x.cfg.perSend {
		if _, _, err := s.x.check(s.ctx, s.method, true); err != nil {
			return err
		}
	}
	return s.ServerStream.SendMsg(m)
}

func (x *interceptor) unaryClient(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
	_, spent, err := x.check(ctx, method, false)
	if err != nil {
		return err
	}
	err = invoker(ctx, method, req, reply, cc, callOpts...)
	x.finish(spent, ctx, method, reply, err)
	return err
}

func (x *interceptor) streamClient(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
	_, spent, err := x.check(ctx, method, false)
	if err != nil {
		return nil, err
	}
	cs, err := streamer(ctx, desc, cc, method, callOpts...)
	if err != nil {
		x.finish(spent, ctx, method, nil, err) // a stream that never opened
	}
	return cs, err
}
