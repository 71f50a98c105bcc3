package cluster

import "time"

// A PeerState is one other node as this engine sees it: the fields of
// core's Peer, which documents them.
type PeerState struct {
	Name      string
	Heard     bool
	LastHeard time.Duration
	InSight   bool
	Leaving   bool
}

// list is every peer as Peers shows it, in order of name; the caller
// holds the engine's lock.
func (v *peerView) list(now int64) []PeerState {
	out := make([]PeerState, 0, len(v.byName))
	for _, p := range v.byName {
		quiet := now - p.lastHeard
		out = append(out, PeerState{
			Name: p.name, Heard: p.heard, LastHeard: time.Duration(max(0, quiet)),
			InSight: quiet <= v.isolationOf(p, now) || !p.heard && quiet <= v.firstContact(),
			Leaving: p.departed,
		})
	}
	return out
}
