package rlserver

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// guardCall opens a call on g as gRPC does, under parent, and counts the
// times the connection cap is told it ended.
func guardCall(t *testing.T, g *callGuard, parent context.Context) (*guardedCall, *atomic.Int32) {
	t.Helper()
	ends := new(atomic.Int32)
	g.started = func(net.Addr) func() { return func() { ends.Add(1) } }
	ctx := peer.NewContext(parent, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}})
	got, err := g.tap(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return got.(*guardedCall), ends
}

// Every way a call can end tells the connection cap exactly once, the
// silent call is ended with errNoFirstMessage within a sweep of
// firstMessageTimeout, and the sweep stops once no call waits.
func TestTheCallGuardEndsEveryCallOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &callGuard{log: quiet}
		opened := time.Now()

		answered, answeredEnds := guardCall(t, g, context.Background())
		ran := false
		_, err := unaryCalls(1)(answered, nil, &grpc.UnaryServerInfo{}, func(ctx context.Context, _ any) (any, error) {
			ran = true
			if answeredEnds.Load() != 0 {
				t.Error("the connection cap was told the call ended before its handler returned")
			}
			return nil, nil
		})
		if err != nil || !ran {
			t.Fatalf("the answered call: ran %v, %v", ran, err)
		}

		gone, cancelGone := context.WithCancel(context.Background())
		leftEarly, leftEarlyEnds := guardCall(t, g, gone)
		cancelGone() // the client gave up before sending its message

		silent, silentEnds := guardCall(t, g, context.Background())

		time.Sleep(firstMessageTimeout - time.Millisecond)
		synctest.Wait()
		if silent.Err() != nil {
			t.Fatalf("the silent call ended after %v, before firstMessageTimeout", time.Since(opened))
		}
		if leftEarlyEnds.Load() != 1 {
			t.Errorf("a call cancelled before its message: the cap was told %d times, want 1", leftEarlyEnds.Load())
		}
		time.Sleep(sweepEvery + time.Millisecond)
		synctest.Wait()
		if cause := context.Cause(silent); !errors.Is(cause, errNoFirstMessage) {
			t.Fatalf("after %v the silent call's context ended with %v, want errNoFirstMessage", time.Since(opened), cause)
		}
		if leftEarly.Err() == nil {
			t.Error("the cancelled call's context is not done")
		}
		for name, n := range map[string]int32{"answered": answeredEnds.Load(), "cancelled": leftEarlyEnds.Load(), "silent": silentEnds.Load()} {
			if n != 1 {
				t.Errorf("%s call: the cap was told %d times it ended, want 1", name, n)
			}
		}
		if n := g.silent.Load(); n != 1 {
			t.Errorf("%d calls counted silent, want 1", n)
		}
		g.mu.Lock()
		waiting, sweeping := len(g.waiting), g.sweeping
		g.mu.Unlock()
		if waiting != 0 || sweeping {
			t.Errorf("with no call open: %d calls waiting, sweep scheduled %v; want none", waiting, sweeping)
		}

		// A call that opens later is swept again, on its own clock.
		late, lateEnds := guardCall(t, g, context.Background())
		time.Sleep(firstMessageTimeout + sweepEvery)
		synctest.Wait()
		if late.Err() == nil || lateEnds.Load() != 1 {
			t.Errorf("a later silent call: done %v, cap told %d times", late.Err() != nil, lateEnds.Load())
		}
	})
}
