package gopherpace

import (
	"time"

	"github.com/pedreviljoen/gopherpace/core/transportkit"
)

// Transport carries a clustered limiter's frames between the nodes of a
// cluster. Delivery is best effort: frames may be lost, duplicated or
// reordered, and the engine is built for that. Several limiters may share
// one Transport; each subscribes for itself and ignores the others' frames.
//
// Implementations must be safe for concurrent use. The memberlist adapter
// module is the production implementation; package memtransport is an
// in-memory one for tests and simulations; package transportkit has helpers
// for writing one.
type Transport interface {
	// Name is this node's unique name in the cluster, as its peers see it
	// in Members and as the from of the frames they receive.
	Name() string
	// Members returns the names of the peers the transport currently
	// believes alive, not including this node. Frames from any other
	// sender are dropped.
	Members() []string
	// MaxFrameSize is the largest frame, in bytes, that Broadcast carries
	// to every peer in one piece; the limiter splits its reports to fit.
	// It must be at least transportkit.MinFrameSize.
	MaxFrameSize() int
	// Broadcast sends frame to every live peer. It must not block on a slow
	// or dead peer, and must not keep frame after it returns.
	Broadcast(frame []byte) error
	// Subscribe registers receive to be called with every frame that
	// arrives from a peer, and the peer's unique node name. receive must
	// not keep frame after it returns. The returned func unsubscribes.
	Subscribe(receive func(from string, frame []byte)) (unsubscribe func())
	// Close shuts the transport down. Limiters never call it: the transport
	// belongs to whoever created it, to be closed after its limiters.
	Close() error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

var _ transportkit.Clock = realClock{}
