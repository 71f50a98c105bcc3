package gopherpace

import (
	"encoding/binary"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
	"github.com/pedreviljoen/gopherpace/core/transportkit"
)

// A hub is a transport's one subscriber in this process, shared by every
// limiter on that transport. It hands each arriving frame to the limiter
// the frame names, and packs the frames its limiters send within
// bundleDelay of one another into one datagram per peer (wire.Next splits
// them again): limiters that share a transport tick together (engine.go),
// so five limiters cost one datagram per peer per tick, not five.
//
// Frames a limiter must send at once (an early flush, a goodbye) go out at
// once, taking whatever is pending along. The hub's counters are atomic;
// its other fields are under its own lock, which is never held while a
// limiter's engine is called (an engine holds its lock while it sends, so
// the order is always engine, then hub).
type hub struct {
	t        Transport
	clock    transportkit.Clock
	maxFrame int
	log      *slog.Logger

	mu          sync.Mutex
	engines     map[uint64]*engine // by limiter ID hash
	unsubscribe func()
	pending     []byte         // frames waiting for the next datagram
	senders     []pendingFrame // whose they are, to count them sent or refused
	stopTimer   func() bool
	// lastVersionWarn and lastSendWarn are when each WARN was last logged
	// (ns since the hub began).
	lastVersionWarn, lastSendWarn int64
	began                         time.Time

	stats hubStats
}

// pendingFrame is one frame of the next datagram: n bytes of s's.
type pendingFrame struct {
	s *senderStats
	n int
}

type hubStats struct {
	datagramsSent, sendFailures        atomic.Uint64
	malformed, otherLimiter, ofVersion atomic.Uint64
}

// bundleDelay is how long a frame that need not go at once waits for the
// frames of the other limiters on its transport. Ticks of limiters on one
// transport fall on the same instants, so their heartbeats meet well
// within it; a heartbeat a millisecond late changes nothing.
const bundleDelay = time.Millisecond

// hubs are the shared hubs, by transport. A transport that cannot be a map
// key gets a hub per limiter.
var hubs = struct {
	mu sync.Mutex
	m  map[Transport]*hub
}{m: map[Transport]*hub{}}

// joinHub hands e the hub of its transport, subscribing the transport's
// one hub on the first join.
func joinHub(e *engine) *hub {
	shared := reflect.ValueOf(e.t).Comparable()
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	var h *hub
	if shared {
		h = hubs.m[e.t]
	}
	if h == nil {
		h = &hub{t: e.t, clock: e.clock, maxFrame: e.maxFrame, log: e.log, engines: map[uint64]*engine{}, began: e.clock.Now()}
		if shared {
			hubs.m[e.t] = h
		}
		h.unsubscribe = e.t.Subscribe(h.receive)
	}
	h.mu.Lock()
	h.engines[e.id] = e
	h.mu.Unlock()
	return h
}

// leave takes e off the hub; the last limiter to leave sends what is
// pending and unsubscribes the hub from its transport.
func (h *hub) leave(e *engine) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	h.mu.Lock()
	delete(h.engines, e.id)
	last := len(h.engines) == 0
	if last {
		h.flushLocked()
	}
	h.mu.Unlock()
	if !last {
		return
	}
	if hubs.m[h.t] == h {
		delete(hubs.m, h.t)
	}
	h.unsubscribe()
}

// send queues frame for every peer: at once when now is set, within
// bundleDelay otherwise. The frame counts in st as sent, or as refused,
// once its datagram has gone.
func (h *hub) send(st *senderStats, frame []byte, now bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pending)+len(frame) > h.maxFrame {
		h.flushLocked()
	}
	h.pending = append(h.pending, frame...)
	h.senders = append(h.senders, pendingFrame{st, len(frame)})
	if now || len(h.engines) < 2 {
		// Alone on its transport a limiter has no one to share with: its
		// frames go at once, as they did before the hub.
		h.flushLocked()
		return
	}
	if h.stopTimer == nil {
		h.stopTimer = h.clock.AfterFunc(bundleDelay, h.flush)
	}
}

// sendAll is send for frames made together (a tick's resends and its
// heartbeat or report): they share datagrams even for a limiter alone on
// its transport, which otherwise sends each at once.
func (h *hub) sendAll(st *senderStats, frames [][]byte) {
	if len(frames) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, frame := range frames {
		if len(h.pending)+len(frame) > h.maxFrame {
			h.flushLocked()
		}
		h.pending = append(h.pending, frame...)
		h.senders = append(h.senders, pendingFrame{st, len(frame)})
	}
	if len(h.engines) < 2 {
		h.flushLocked()
		return
	}
	if h.stopTimer == nil {
		h.stopTimer = h.clock.AfterFunc(bundleDelay, h.flush)
	}
}

func (h *hub) flush() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushLocked()
}

// flushLocked sends the pending frames as one datagram, and counts each
// frame sent or refused in its limiter's stats. A transport that keeps
// refusing loses the cluster its limit, so that is logged, at most every
// degradedLogEvery.
func (h *hub) flushLocked() {
	if h.stopTimer != nil {
		h.stopTimer()
		h.stopTimer = nil
	}
	if len(h.pending) == 0 {
		return
	}
	err := h.t.Broadcast(h.pending)
	for _, p := range h.senders {
		if err != nil {
			p.s.sendFailures.Add(1)
		} else {
			p.s.framesSent.Add(1)
			p.s.bytesSent.Add(uint64(p.n))
		}
	}
	h.pending, h.senders = h.pending[:0], h.senders[:0]
	if err == nil {
		h.stats.datagramsSent.Add(1)
		return
	}
	h.stats.sendFailures.Add(1)
	if now := int64(h.clock.Now().Sub(h.began)); h.lastSendWarn == 0 || now-h.lastSendWarn >= degradedLogEvery {
		h.lastSendWarn = now
		h.log.Warn("the transport refused a datagram; peers will not hear these limiters' admits until it sends again",
			"err", err, "refused so far", h.stats.sendFailures.Load())
	}
}

// receive splits a datagram into its frames and hands each to the
// limiter it names. A datagram that cannot be split is dropped from the
// first bad frame on, and counted; one of another wire version is logged,
// at most every degradedLogEvery, since it means a node of another
// release, not noise.
func (h *hub) receive(from string, b []byte) {
	if len(b) == 0 {
		h.stats.malformed.Add(1)
		return
	}
	for len(b) > 0 {
		f, rest, err := wire.Next(b)
		if err != nil {
			if err == wire.ErrVersion {
				h.stats.ofVersion.Add(1)
				h.warnVersion(from, b[2])
			} else {
				h.stats.malformed.Add(1)
			}
			return
		}
		h.mu.Lock()
		e := h.engines[binary.LittleEndian.Uint64(f[4:12])]
		h.mu.Unlock()
		if e == nil {
			h.stats.otherLimiter.Add(1)
		} else {
			e.receive(from, f)
		}
		b = rest
	}
}

func (h *hub) warnVersion(from string, version byte) {
	now := int64(h.clock.Now().Sub(h.began))
	h.mu.Lock()
	due := h.lastVersionWarn == 0 || now-h.lastVersionWarn >= degradedLogEvery
	if due {
		h.lastVersionWarn = now
	}
	h.mu.Unlock()
	if due {
		h.log.Warn("a peer sends frames of another wire version; they are refused until every node runs one release (docs/releasing.md)",
			"peer", from, "its version", version, "this node's", wire.Version, "refused so far", h.stats.ofVersion.Load())
	}
}
