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

// Unicaster is a Transport that can also send to one member. In a
// cluster of 11 nodes or more the limiters of a transport that is
// one send each datagram to the few peers of their group and relay the
// rest, instead of broadcasting it to every peer (internal/datagram,
// docs/design.md "Groups"); over a Transport that is not, every frame
// goes to every peer.
type Unicaster interface {
	// SendTo sends datagram to the member named member alone, with
	// Broadcast's guarantees (best effort, never blocking, not keeping
	// datagram). A name that is not a member is no error: the datagram is
	// lost.
	SendTo(member string, datagram []byte) error
}

// Zoner is a Transport that knows each member's zone (or region, or
// rack): a label such as the Kubernetes topology.kubernetes.io/zone. When
// the cluster spans two zones or more, the groups of a Unicaster follow
// the zones (each zone a group, or several once it holds zoneSplitFrom
// nodes), so that a frame crosses from one zone to another once, to one
// node that spreads it there, instead of once per node of the other zone.
type Zoner interface {
	// Zone is the zone of the member named member (this node's own name
	// included), or "" when it is not known.
	Zone(member string) string
}

// KeyHashSecreter is a Transport that gives the limiters of its cluster
// the secret of their key hash, so that every node names a key alike and
// nobody outside the cluster can compute those names (keyhash.go). A
// limiter over a transport that is not one, or that gives nil, hashes
// keys under a public secret unless WithKeyHashSecret pins one.
type KeyHashSecreter interface {
	// KeyHashSecret is at least 16 bytes, the same on every node of the
	// cluster and unknown outside it; nil when the transport has none.
	KeyHashSecret() []byte
}

// JoinReporter is a Transport that knows when the cluster it was told to
// join refuses it (a gossip key or label that does not match): such a
// node must not take itself for the first of a new cluster and serve the
// whole limit alone. Limiter.JoinError passes its word on, and
// status.Ready answers 503 while it is not nil.
type JoinReporter interface {
	// JoinError is non-nil while the node is alone and the seeds it
	// reached refused it; nil once it has a peer, and when no seed
	// answered at all (the first node of a new cluster).
	JoinError() error
}

// GoneReporter is a Transport that can tell, of a member it no longer
// lists, whether it is gone for good rather than cut off: its host
// refused a connection to its port (nothing listens there: the process
// died), or the seeds no longer list its address (the pod was deleted).
// A partition gives no such word, since nothing answers across it. A
// node that sees a strict minority of the known nodes cannot otherwise
// tell the others' crash from being cut off from them; with this word it
// stops counting them at once, and serves the whole rate.
type GoneReporter interface {
	// Gone reports whether the member named member, which Members no
	// longer lists, is known to be gone for good.
	Gone(member string) bool
}

// clockOf is t's clock when it has one (a simulated network's), else the
// real one.
func clockOf(t Transport) transportkit.Clock {
	if clk, ok := t.(transportkit.Clock); ok {
		return clk
	}
	return realClock{}
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

var _ transportkit.Clock = realClock{}
