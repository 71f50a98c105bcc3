package gopherpace

import "time"

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
