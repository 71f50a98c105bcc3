// Package transportkit is for authors of gopherpace transports: a
// ready-made subscriber list (Receivers), the frame size that fits one UDP
// datagram, and the optional Clock capability through which a simulated
// network runs limiters on virtual time. Applications never need it.
//
// The contract itself, gopherpace.Transport, lives in the root package,
// since applications hand a Transport to gopherpace.WithTransport.
package transportkit

import "time"

// DefaultMaxFrameSize keeps a frame in one UDP datagram on a 1500-byte MTU
// network, with room for memberlist's and IP's headers. A transport over
// UDP should report it (or less) from MaxFrameSize.
const DefaultMaxFrameSize = 1350

// MinFrameSize is the smallest MaxFrameSize a Transport may report: room
// for a frame's header and at least one keyed count.
const MinFrameSize = 136

// Clock is an optional Transport capability for simulated networks: a
// transport that brings its own virtual time makes the limiters that use
// it run on that time instead of real timers, so whole cluster scenarios
// run deterministically in a fraction of real time. A transport that
// wraps another must forward it, or the limiters fall back to real time.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once, d from now, on the clock's own schedule.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}
