package datagram

import "sync/atomic"

// Transport is what the hub needs of a cluster's transport: core's
// Transport, whose doc states the contract.
type Transport interface {
	Name() string
	Members() []string
	MaxFrameSize() int
	Broadcast(datagram []byte) error
	Subscribe(receive func(from string, datagram []byte)) (unsubscribe func())
}

// Unicaster is a Transport that can send to one member (core's
// Unicaster): over one, a large cluster is grouped.
type Unicaster interface {
	SendTo(member string, datagram []byte) error
}

// Zoner is a Transport that knows its members' zones (core's Zoner): the
// groups follow them.
type Zoner interface {
	Zone(member string) string
}

// Limiter is a limiter's engine as its hub sees it. The hub never holds
// its own lock while it calls one, so a Limiter may send from inside
// these calls.
type Limiter interface {
	// Deliver takes one frame from the member from; relayed is set when
	// it came through another node.
	Deliver(from string, frame []byte, relayed bool)
	// TaggedStream is what a tagged digest entry of from's needs of the
	// stream its tag stands for (wire.IncarnationTag); ok is false when
	// the limiter has heard no incarnation of from's with that tag.
	TaggedStream(from string, tag uint16, horizon int64) (s TaggedStream, ok bool)
}

// TaggedStream is a stream of frames as the limiter that hears it knows
// it: its incarnation and latest running totals, and whether it was heard
// within the horizon asked for (else a truncated total cannot be widened
// from them).
type TaggedStream struct {
	Incarnation    uint64
	Global, Demand uint64
	Recent         bool
}

// Sent counts a limiter's frames once the hub has sent their datagram:
// those that went, their bytes, and those the transport refused.
type Sent struct {
	Frames, Bytes, Failures atomic.Uint64
}

func (s *Sent) count(n int, ok bool) {
	if !ok {
		s.Failures.Add(1)
		return
	}
	s.Frames.Add(1)
	s.Bytes.Add(uint64(n))
}
