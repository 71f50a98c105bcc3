package gopherpace

import (
	"sync"
	"sync/atomic"
	"time"
)

// Transport carries a clustered limiter's frames between the nodes of a
// cluster. Delivery is best effort: frames may be lost, duplicated or
// reordered, and the engine is built for that. Several limiters may share
// one Transport; each subscribes for itself and ignores the others' frames.
//
// Implementations must be safe for concurrent use. The memberlist adapter
// module is the production implementation; package memtransport is an
// in-memory one for tests and simulations.
type Transport interface {
	// Broadcast sends frame to every live peer. It must not block on a slow
	// or dead peer, and must not keep frame after it returns.
	Broadcast(frame []byte) error
	// Subscribe registers receive to be called with every frame that
	// arrives from a peer, and the peer's unique node name. receive must
	// not keep frame after it returns. The returned func unsubscribes.
	Subscribe(receive func(from string, frame []byte)) (unsubscribe func())
	// Members returns the names of the peers the transport currently
	// believes alive, not including this node.
	Members() []string
	// Close shuts the transport down. Limiters never call it: the transport
	// belongs to whoever created it, to be closed after its limiters.
	Close() error
}

// FrameSizer is an optional Transport capability: the largest frame, in
// bytes, that the transport can carry in one datagram. Without it the engine
// keeps frames within DefaultMaxFrameSize.
type FrameSizer interface {
	MaxFrameSize() int
}

// DefaultMaxFrameSize keeps a frame in one UDP datagram on a 1500-byte MTU
// network, with room for memberlist's and IP's headers.
const DefaultMaxFrameSize = 1350

// Clock is an optional Transport capability for simulated networks: a
// transport that brings its own virtual time makes the engines that use it
// run on that time instead of real timers, so whole cluster scenarios run
// deterministically in a fraction of real time.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once, d from now, on the clock's own schedule.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Receivers is a ready-made subscriber list for Transport implementations:
// call Subscribe from the transport's Subscribe, and Deliver for every frame
// that arrives. The zero value is ready to use and it is safe for
// concurrent use. Deliver holds no lock while it calls the subscribers, so a
// subscriber may unsubscribe (a limiter closing) while a frame is being
// delivered to it.
type Receivers struct {
	mu   sync.Mutex // serialises changes; readers use list
	next int
	list atomic.Pointer[[]receiver]
}

type receiver struct {
	id int
	f  func(from string, frame []byte)
}

// Subscribe registers receive; the returned func removes it.
func (r *Receivers) Subscribe(receive func(from string, frame []byte)) (unsubscribe func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.next
	r.next++
	r.replaceLocked(func(old []receiver) []receiver { return append(old, receiver{id, receive}) })
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.replaceLocked(func(old []receiver) []receiver {
			out := make([]receiver, 0, len(old))
			for _, x := range old {
				if x.id != id {
					out = append(out, x)
				}
			}
			return out
		})
	}
}

// replaceLocked publishes a new list built from a copy of the current one.
func (r *Receivers) replaceLocked(change func([]receiver) []receiver) {
	var old []receiver
	if p := r.list.Load(); p != nil {
		old = *p
	}
	next := change(append([]receiver(nil), old...))
	r.list.Store(&next)
}

// Deliver hands frame from a peer to every subscriber.
func (r *Receivers) Deliver(from string, frame []byte) {
	p := r.list.Load()
	if p == nil {
		return
	}
	for _, x := range *p {
		x.f(from, frame)
	}
}
