package gopherpace

import (
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// The engine's timers, and the flush that sends this node's counts.

func (e *engine) onTick() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	now := e.now()
	e.clockNow.Store(now)
	e.evaluate(now)
	e.rebalance(now)
	e.resync(now)
	// Resend the last ticks' frames, then send this tick's (always at least
	// a header: it is also the heartbeat that tells peers we are here).
	for i := resendTicks; i >= 1; i-- {
		for _, f := range e.sent[i-1] {
			e.broadcast(f)
		}
	}
	copy(e.sent[1:], e.sent[:resendTicks])
	e.sent[0] = nil
	e.flushLocked(now, true, false)
	e.stopTick = e.clock.AfterFunc(time.Duration(e.tick), e.onTick)
}

func (e *engine) onKick() {
	e.kicked.Store(false)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	now := e.now()
	if wait := e.lastFlush + minFlushGap - now; wait > 0 {
		if e.kicked.CompareAndSwap(false, true) {
			e.clock.AfterFunc(time.Duration(wait), e.onKick)
		}
		return
	}
	e.flushLocked(now, false, false)
}

// flushLocked sends every unsent count, split into frames that fit the
// transport, and keeps them for resending. With heartbeat it sends a bare
// header when there is nothing to count. It returns the frames sent.
func (e *engine) flushLocked(now int64, heartbeat, leaving bool) [][]byte {
	global := e.global.drain(e.pols.dflt(), e.bucketTime(now))
	batch := e.batch[:0]
	var flights []flying
	for i := range e.dirty {
		d := &e.dirty[i]
		d.mu.Lock()
		list := d.list
		d.list = nil
		d.mu.Unlock()
		for _, k := range list {
			if n := k.e.pending.Swap(0); n > 0 {
				batch = append(batch, wire.KeyCount{Key: k.h, Tokens: n})
				if !e.floor {
					k.e.inflight.Add(n)
					flights = append(flights, flying{k.e, n})
				}
			}
		}
	}
	e.batch = batch[:0]
	e.inFlight(global, flights)
	reported := uint64(global)
	for _, kc := range batch {
		reported += uint64(kc.Tokens)
	}
	e.stats.tokensReported.Add(reported)
	if global == 0 && len(batch) == 0 && !heartbeat && !leaving {
		return nil
	}
	e.lastFlush = now
	e.globalSum += uint64(global)
	// Only keyed entries need numbering and resending: the global total
	// rides in every frame, heartbeats included.
	carries := len(batch) > 0
	var frames [][]byte
	f := wire.Frame{Leaving: leaving, Limiter: e.id, Incarnation: e.inc, GlobalSum: e.globalSum, Global: global,
		DemandSum: e.demandTotal(), Level: e.levelTokens(now), Withheld: uint64(e.withheld * wire.WithheldOne)}
	for first := true; first || len(batch) > 0; first = false {
		// Fill one frame with as many entries as fit.
		room, n := e.maxFrame-wire.HeaderMax, 0
		for n < len(batch) && room >= wire.EntrySize(batch[n]) {
			room -= wire.EntrySize(batch[n])
			n++
		}
		f.Seq = 0
		if carries {
			e.seq++
			f.Seq = e.seq
		}
		b := wire.AppendHeader(make([]byte, 0, e.maxFrame-room), &f, n)
		for _, kc := range batch[:n] {
			b = wire.AppendEntry(b, kc)
		}
		batch = batch[n:]
		f.Global = 0 // the global count rides in the first frame only
		e.broadcast(b)
		frames = append(frames, b)
	}
	if carries {
		e.sent[0] = append(e.sent[0], frames...)
	}
	return frames
}

// inFlight counts the tokens of a flush as unheard for reportFlight: the
// global count here, the keyed ones (already added to their entries) in
// keyed.
func (e *engine) inFlight(global int64, keyed []flying) {
	if e.floor || global == 0 && len(keyed) == 0 {
		return
	}
	e.global.inflight.Add(global)
	e.clock.AfterFunc(time.Duration(reportFlight), func() {
		e.global.inflight.Add(-global)
		for _, f := range keyed {
			f.ent.inflight.Add(-f.n)
		}
	})
}

// flying is a keyed entry's count in flight.
type flying struct {
	ent *clusterEntry
	n   int64
}

func (e *engine) broadcast(b []byte) {
	if err := e.t.Broadcast(b); err != nil {
		// Best effort: the resends and the next tick cover a lost frame.
		// A transport that keeps refusing loses the cluster its limit, so
		// say so, once a while.
		e.stats.sendFailures.Add(1)
		e.warnf(e.now(), &e.lastSendWarn, "the transport refused a frame; peers will not hear this node's admits until it sends again",
			"err", err, "failures", e.stats.sendFailures.Load())
		return
	}
	e.stats.framesSent.Add(1)
	e.stats.bytesSent.Add(uint64(len(b)))
}
