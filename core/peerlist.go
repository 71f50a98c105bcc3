package gopherpace

import "time"

// A Peer is one other node as this clustered limiter sees it, for status
// pages and health checks.
type Peer struct {
	// Name is the peer's name on the transport.
	Name string
	// Heard reports whether a frame from it has arrived; LastHeard is how
	// long ago the last one did (or, before any, how long it has been
	// listed as a member).
	Heard     bool
	LastHeard time.Duration
	// InSight reports that it counts as visible: heard within the
	// isolation timeout (1.5 gossip intervals), or a new member not heard
	// yet. A known peer out of sight is a partition, or a crash within the
	// grace period.
	InSight bool
	// Leaving reports that its last frame said goodbye.
	Leaving bool
}

// Peers lists the other nodes this limiter knows, by name; nil when
// standalone.
func (l *Limiter) Peers() []Peer {
	return l.dec.peers()
}
