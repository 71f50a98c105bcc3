package adapter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/pedreviljoen/gopherpace/core/clientip"
	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// A Flow is the request sequence every adapter runs, written once for
// a framework whose requests are of type C (*http.Request, *gin.Context,
// echo.Context...): skip, key, further keys, cost, decide, and after the
// handler the refund. The adapter keeps only its framework's I/O: the
// client's address, writing the fields, the answers.
//
// Build one per middleware with NewFlow; it is immutable and safe for
// concurrent use. Per request:
//
//	var req adapter.Request
//	switch flow.Decide(c, &req) {
//	case adapter.Skip: // call the next handler
//	case adapter.Fail: // answer req.Err() (see Answer)
//	case adapter.Deny: // write the fields, answer DeniedMessage
//	case adapter.Admit: // write the fields, call the next handler, then flow.Finish
//	}
type Flow[C any] struct {
	gate    *Gate
	key     func(C) (string, error)
	also    []func(C) (string, error)
	cost    func(C) int64
	skip    func(C) bool
	peer    func(C) (netip.Addr, string)
	named   bool
	fwd     func(C) (forwardedFor []string, realIP string)
	ctx     func(C) context.Context
	clone   bool
	fastIP4 bool // no trusted proxies: the peer is the client, and an IPv4 address as written is its key
	plain   bool // no skip, key, further keys or cost: Prepare is clientKey and a cost of 1
}

// Hooks are the framework's part of a Flow: how to read its requests.
// Key, Also, Cost and Skip are the adapter's options (nil: the default);
// Peer and Forwarded read the client's address for the default key.
type Hooks[C any] struct {
	// Key is the bucket of a request; nil keys by the client's address.
	Key func(C) (string, error)
	// Also are the keys of the further limits (Settings.Also), in order;
	// a nil entry is the same key as Key's.
	Also []func(C) (string, error)
	// Cost is a request's tokens; nil is 1.
	Cost func(C) int64
	// Skip exempts a request: it spends nothing and gets no fields.
	Skip func(C) bool
	// Peer is the connection a request came over: its address when the
	// framework has it parsed, or else as written ("ip:port", as
	// net/http's RemoteAddr). Required.
	Peer func(C) (addr netip.Addr, hostPort string)
	// NamedPeers keys a peer that is not IP (a Unix socket) by its name,
	// the hostPort Peer returns; without it such a peer is
	// clientip.ErrNoClientIP, a server error.
	NamedPeers bool
	// Forwarded reads X-Forwarded-For (every field, in order) and
	// X-Real-IP; it is called only when the peer is a trusted proxy.
	// Required.
	Forwarded func(C) (forwardedFor []string, realIP string)
	// KeysOutliveRequest says that strings read from a request may be
	// reused once its handler returns (fasthttp): with refunds on, or
	// Settles, the flow keeps copies of the keys.
	KeysOutliveRequest bool
	// Settles says the adapter settles requests after their handler
	// (Gate.Settle), so it needs their keys then.
	Settles bool
	// Context is the request's context, which ends a wait for tokens
	// (Settings.MaxDelay). Required when the gate shapes traffic.
	Context func(C) context.Context
}

// RequestPeer is the peer of an *http.Request, for Hooks.Peer.
func RequestPeer(r *http.Request) (netip.Addr, string) { return netip.Addr{}, r.RemoteAddr }

// AddrPeer is the peer of a connection whose address the framework
// gives as a net.Addr (fasthttp's RemoteAddr, gRPC's peer), for
// Hooks.Peer: a TCP address parsed, an IPv4 one as its four bytes, and any
// other (a Unix socket) by name, which the flow fails as no client IP
// unless Hooks.NamedPeers keys it.
func AddrPeer(a net.Addr) (netip.Addr, string) {
	switch a := a.(type) {
	case *net.TCPAddr:
		if a == nil {
			break
		}
		if ip4 := a.IP.To4(); ip4 != nil {
			return netip.AddrFrom4([4]byte(ip4)), ""
		}
		if addr, ok := netip.AddrFromSlice(a.IP); ok {
			return addr, ""
		}
	case nil:
		return netip.Addr{}, ""
	}
	return netip.Addr{}, a.String()
}

// RequestForwarded reads an *http.Request's forwarding fields.
func RequestForwarded(r *http.Request) (forwardedFor []string, realIP string) {
	return r.Header.Values("X-Forwarded-For"), r.Header.Get("X-Real-IP")
}

// NewFlow returns the flow of g's requests, read with h.
func NewFlow[C any](g *Gate, h Hooks[C]) (*Flow[C], error) {
	if h.Peer == nil || h.Forwarded == nil {
		return nil, errors.New("a Flow needs Peer and Forwarded")
	}
	if len(h.Also) != g.Limits()-1 {
		return nil, fmt.Errorf("%d keys for %d further limits", len(h.Also), g.Limits()-1)
	}
	if g.Shapes() && h.Context == nil {
		return nil, errors.New("a Flow of a gate that shapes traffic needs Context")
	}
	f := &Flow[C]{
		gate: g, key: h.Key, also: h.Also, cost: h.Cost, skip: h.Skip, peer: h.Peer, named: h.NamedPeers, fwd: h.Forwarded, ctx: h.Context,
		clone: h.KeysOutliveRequest && (g.Refunds() || h.Settles), fastIP4: len(g.ip.TrustedProxies) == 0,
	}
	f.plain = f.skip == nil && f.key == nil && len(f.also) == 0 && f.cost == nil && !f.clone && !g.Shapes()
	return f, nil
}

// Gate is the flow's gate.
func (f *Flow[C]) Gate() *Gate { return f.gate }

// A Step is where Decide leaves a request, and so what the adapter does
// next.
type Step uint8

const (
	// Admit: the request goes on. Write the fields (Gate.HasFields), keep
	// the Decision for handlers if asked, call the next handler, then
	// Finish with the response's status.
	Admit Step = iota
	// Deny: write the fields, then answer the denial (the deny handler,
	// or DeniedStatus and DeniedMessage).
	Deny
	// Skip: the request goes on untouched; it spent nothing.
	Skip
	// Fail: the key or the cost could not be used (Request.Err); answer
	// it (the error handler, or Answer). It spent nothing.
	Fail
)

// Prepare runs the flow up to the decision: skip, keys and cost. It
// returns Skip, Fail, or Admit for a request ready for Gate.Decide (or
// Limiter.Wait with Request.Key(0), as gRPC's waiting clients do).
func (f *Flow[C]) Prepare(c C, r *Request) Step {
	if f.skip != nil && f.skip(c) {
		return Skip
	}
	if f.key != nil {
		k, err := f.key(c)
		if err != nil {
			return r.fail(err)
		}
		r.Keys[0] = k
	} else if err := f.clientKey(c, r); err != nil {
		return r.fail(err)
	}
	for i, also := range f.also {
		if also == nil {
			r.Keys[i+1], r.own = r.Keys[0], r.own|(r.own&1)<<(i+1)
			continue
		}
		k, err := also(c)
		if err != nil {
			return r.fail(err)
		}
		r.Keys[i+1] = k
	}
	if f.clone {
		for i := range f.gate.Limits() {
			r.Keys[i] = strings.Clone(r.Keys[i]) // "" for a key held in r
		}
	}
	r.Cost = 1
	if f.cost != nil {
		r.Cost = f.cost(c)
	}
	return Admit
}

// Decide runs the flow up to the answer: Prepare, then the decision.
func (f *Flow[C]) Decide(c C, r *Request) Step {
	// Most middleware keys by the client's address, one token a request,
	// one limit: that path is written out here, a call or two shorter.
	if f.plain {
		if err := f.clientKey(c, r); err != nil {
			return r.fail(err)
		}
		r.Cost = 1
	} else if s := f.Prepare(c, r); s != Admit {
		return s
	}
	var err error
	switch g := f.gate; {
	case g.limits == nil && !g.absolute && !g.Shapes():
		r.d, err = g.l.Take(r.Key(0), r.Cost) // Gate.Decide's first case
	case g.Shapes():
		err = g.Shape(f.ctx(c), r)
	default:
		err = g.Decide(r)
	}
	if err != nil {
		return r.fail(err)
	}
	if !r.d.Allowed || f.gate.inFlight != nil && !f.gate.holdSlot(r) {
		return Deny
	}
	return Admit
}

// Finish ends an admitted request whose response has this status: its
// tokens come back if the gate refunds that status.
func (f *Flow[C]) Finish(r *Request, status int) { f.gate.RefundFor(r, status) }

// clientKey keys r by the client's address, into r's own buffer.
func (f *Flow[C]) clientKey(c C, r *Request) error {
	addr, hostPort := f.peer(c)
	if !addr.IsValid() {
		// net/http's RemoteAddr: an IPv4 address as Go writes it is its
		// own key, with nothing to parse, copy or allocate.
		if f.fastIP4 {
			if host, ok := clientip.IPv4Host(hostPort); ok {
				r.Keys[0] = host
				return nil
			}
		}
		a, ok := clientip.ParseHost(hostPort)
		if !ok {
			if !f.named || hostPort == "" {
				return clientip.ErrNoClientIP
			}
			r.Keys[0] = hostPort
			return nil
		}
		addr = a
	}
	if f.fastIP4 {
		r.ownKey(clientip.AppendKey(r.buf[:0], addr, f.gate.ip.Prefix6()))
		return nil
	}
	var xff []string
	var real string
	if f.gate.ip.Trusts(addr) {
		xff, real = f.fwd(c)
	}
	r.ownKey(f.gate.ip.AppendKeyAddr(r.buf[:0], addr, xff, real))
	return nil
}

// Answers: what every adapter says for each outcome, each in its
// framework's envelope (docs/adapters.md#answers).
const (
	// DeniedStatus answers a denial.
	DeniedStatus = http.StatusTooManyRequests
	// DeniedMessage is the message of a denial.
	DeniedMessage = render.DeniedMessage
	// ServerErrorMessage is the message of an error that is not the
	// request's fault (a peer that is not IP, a key function's own
	// error): it says where, and keeps the details from the client.
	ServerErrorMessage = "rate limiter error"
)

// Answer is the status and message that answer an error from a key
// function or from the decision: 400 and the error's text for the
// request's own faults (ClientFault: the text says what to change), 500
// and ServerErrorMessage for the rest.
func Answer(err error) (status int, message string) {
	if ClientFault(err) {
		return http.StatusBadRequest, err.Error()
	}
	return http.StatusInternalServerError, ServerErrorMessage
}
