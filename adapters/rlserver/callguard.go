package rlserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/tap"
)

// errNoFirstMessage ends a call that sent no message in time.
var errNoFirstMessage = errors.New("no request message within " + firstMessageTimeout.String())

// sweepEvery is how often the guard looks over the calls still waiting for
// their first message: a silent call ends between firstMessageTimeout and
// firstMessageTimeout+sweepEvery after it opened.
const sweepEvery = 500 * time.Millisecond

// callGuard sees every call as its stream opens, before any message: it
// tells the connection cap that the call's connection is busy until the
// call ends, and ends a call that sends no message within
// firstMessageTimeout. A stream that never sends is otherwise held for
// as long as its client likes: gRPC's own limits count it neither idle
// nor in flight.
//
// The guard sweeps the waiting calls rather than arm a timer per call: a
// call costs a context and a slot in a list, and nothing when it ends, so
// the guard adds little to a decision's CPU time (docs/service.md, "CPU
// time per decision"). The sweep runs only while calls wait, so an idle
// server holds no goroutine and no timer.
type callGuard struct {
	started func(net.Addr) (done func()) // the connection cap's CallStarted; nil without one
	log     *slog.Logger
	metrics *serviceMetrics

	mu       sync.Mutex
	waiting  []*guardedCall // calls opened since the last sweep or still silent
	sweeping bool           // a sweep is scheduled
	sweep    *time.Timer

	silent   atomic.Uint64 // calls ended for sending nothing
	lastWarn atomic.Int64
}

// guardedCall is one call's context as the guard hands it to gRPC: the
// stream's own, made cancellable, carrying the call's state for the
// interceptors (Value(guardedCallKey{}) is the call itself).
type guardedCall struct {
	context.Context
	cancel  context.CancelCauseFunc
	opened  time.Time
	arrived atomic.Bool // its first message came
	ended   atomic.Bool // done was called
	done    func()      // the connection cap's; nil without one
}

type guardedCallKey struct{}

func (c *guardedCall) Value(key any) any {
	if key == (guardedCallKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// end tells the connection cap, once, that the call is over.
func (c *guardedCall) end() {
	if c.done != nil && c.ended.CompareAndSwap(false, true) {
		c.done()
	}
}

func (g *callGuard) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	c := &guardedCall{opened: time.Now()}
	if p, ok := peer.FromContext(ctx); ok && g.started != nil {
		c.done = g.started(p.Addr)
	}
	c.Context, c.cancel = context.WithCancelCause(ctx)
	g.mu.Lock()
	g.waiting = append(g.waiting, c)
	if !g.sweeping {
		g.sweeping = true
		if g.sweep == nil {
			g.sweep = time.AfterFunc(sweepEvery, g.sweepWaiting)
		} else {
			g.sweep.Reset(sweepEvery)
		}
	}
	g.mu.Unlock()
	return c, nil
}

// sweepWaiting forgets the calls whose message came (their interceptor
// ends them), ends the calls that are over without one (a cancelled call,
// or one whose message did not decode), ends with errNoFirstMessage the
// calls silent for firstMessageTimeout, and runs again while any wait.
func (g *callGuard) sweepWaiting() {
	g.mu.Lock()
	calls := g.waiting
	g.waiting = nil
	g.mu.Unlock()
	now := time.Now()
	still := calls[:0]
	for _, c := range calls {
		switch {
		case c.arrived.Load():
		case c.Err() != nil:
			c.end()
		case now.Sub(c.opened) >= firstMessageTimeout:
			c.cancel(errNoFirstMessage)
			c.end()
			g.ended()
		default:
			still = append(still, c)
		}
	}
	clear(calls[len(still):])
	g.mu.Lock()
	g.waiting = append(g.waiting, still...)
	g.sweeping = len(g.waiting) > 0
	if g.sweeping {
		g.sweep.Reset(sweepEvery)
	}
	g.mu.Unlock()
}

// ended counts a call ended for its silence, and says so at most every
// logEvery.
func (g *callGuard) ended() {
	n := g.silent.Add(1)
	g.metrics.silentCall()
	if g.log == nil {
		return
	}
	now := time.Now().UnixNano()
	last := g.lastWarn.Load()
	if last != 0 && now-last < int64(logEvery) || !g.lastWarn.CompareAndSwap(last, now) {
		return
	}
	g.log.Warn("gRPC calls that sent no request message were ended", "after", firstMessageTimeout, "ended so far", n)
}

// firstMessageArrived marks the call's first message come; the call
// returned tells the connection cap when the call ends (nil for a context
// the guard did not make). A unary call's message has come when the
// interceptor runs (unaryCalls); a stream's, at its first RecvMsg.
func firstMessageArrived(ctx context.Context) *guardedCall {
	c, ok := ctx.Value(guardedCallKey{}).(*guardedCall)
	if ok {
		c.arrived.Store(true)
	}
	return c
}

// firstMessageStream marks a stream's first message, and ends the call
// when its handler returns.
func firstMessageStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if c, ok := ss.Context().Value(guardedCallKey{}).(*guardedCall); ok {
		defer c.end()
	}
	return handler(srv, &firstMessageWatch{ServerStream: ss})
}

type firstMessageWatch struct {
	grpc.ServerStream
	seen bool
}

func (w *firstMessageWatch) RecvMsg(m any) error {
	err := w.ServerStream.RecvMsg(m)
	if err == nil && !w.seen {
		w.seen = true
		firstMessageArrived(w.Context())
	}
	return err
}
