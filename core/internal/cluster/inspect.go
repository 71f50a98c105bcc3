package cluster

import (
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/datagram"
)

// What core's tests and benchmarks read of an engine, and drive, from
// outside the package. The request path uses none of it.

// Tick is the time between ticks: half the gossip interval.
func (e *Engine) Tick() time.Duration { return time.Duration(e.tick) }

// Hub is the transport's hub the engine sends through.
func (e *Engine) Hub() *datagram.Hub { return e.hub }

// RunTick runs one tick now, as its timer would.
func (e *Engine) RunTick() { e.onTick() }

// FlushNow sends every unsent count at once.
func (e *Engine) FlushNow() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.send.flush(e.now(), false, false, true)
}

// KeysBusy reports whether any key holds counts unsent or not yet
// settled after sending.
func (e *Engine) KeysBusy() bool {
	busy := false
	e.keys.Each(func(_ uint64, ent *clusterEntry) { busy = busy || ent.Busy() })
	return busy
}

// Share is the price of one share token (ns per token), and whether the
// share is in force and whether it is sliced.
func (e *Engine) Share() (interval time.Duration, on, sliced bool) {
	s := &e.fair.share
	return time.Duration(s.iv.Load()), s.on.Load(), s.slicing()
}
