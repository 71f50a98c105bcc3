package otelpace

import (
	"errors"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"go.opentelemetry.io/otel/metric"
)

// inFlightInstruments are the in-flight limits' instruments, one stream per
// limit (and per attribute value below); docs/operations.md lists them
// beside prompace's names.
type inFlightInstruments struct {
	requests, capped, frames, peerKeysDropped metric.Int64ObservableCounter
	held, limit, peers                        metric.Int64ObservableGauge
}

func newInFlightInstruments(m metric.Meter) (in inFlightInstruments, _ error) {
	b := &builder{m: m}
	counter, gauge := b.counter, b.gauge
	in.requests = counter("gopherpace.inflight.requests", "{request}",
		"Requests asked of an in-flight limit, by decision: acquired (a slot taken) or refused (none free).")
	in.capped = counter("gopherpace.inflight.capped", "{request}",
		"Refused requests (among the refused) for which a slot was free beyond this node's share, but it had taken its local cap of those this tick.")
	in.frames = counter("gopherpace.inflight.frames", "{frame}",
		"Gauge frames sent (direction sent) and peers' frames not used, whole or in part (direction dropped).")
	in.peerKeysDropped = counter("gopherpace.inflight.peer_keys.dropped", "{key}", "Peers' keys beyond WithMaxKeys, not counted.")
	in.held = gauge("gopherpace.inflight.held", "{request}",
		"The keyless limit's requests in flight, by scope: node (this one's) or cluster (as this node knows it).")
	in.limit = gauge("gopherpace.inflight.limit", "{request}", "The most requests in flight per key.")
	in.peers = gauge("gopherpace.inflight.peers", "{node}", "Peers this node has heard from.")
	return in, b.err
}

func (in *inFlightInstruments) all() []metric.Observable {
	return []metric.Observable{in.requests, in.capped, in.frames, in.peerKeysDropped, in.held, in.limit, in.peers}
}

// observe reads f's Stats once and observes every instrument.
func (in *inFlightInstruments) observe(o metric.Observer, name string, f *gopherpace.InFlight) {
	s := f.Stats()
	_, one, by := limiterAttrs(name)
	o.ObserveInt64(in.requests, clamp(s.Acquired), by("decision", "acquired"))
	o.ObserveInt64(in.requests, clamp(s.Refused), by("decision", "refused"))
	o.ObserveInt64(in.capped, clamp(s.Capped), one)
	o.ObserveInt64(in.frames, clamp(s.FramesSent), by("direction", "sent"))
	o.ObserveInt64(in.frames, clamp(s.FramesDropped), by("direction", "dropped"))
	o.ObserveInt64(in.peerKeysDropped, clamp(s.PeerKeysDropped), one)
	o.ObserveInt64(in.held, s.Held, by("scope", "node"))
	o.ObserveInt64(in.held, s.ClusterHeld, by("scope", "cluster"))
	o.ObserveInt64(in.limit, f.Limit(), one)
	o.ObserveInt64(in.peers, int64(s.Peers), one)
}

// AddInFlight observes the in-flight limit f under the attribute
// limiter=name, as gopherpace.inflight.* instruments. Names must be unique
// among the in-flight limits.
func (m *Metrics) AddInFlight(name string, f *gopherpace.InFlight) error {
	if name == "" || f == nil {
		return errors.New("otelpace: an in-flight limit needs a name and a value")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.usable("in-flight limit", name, m.inFlight[name] != nil); err != nil {
		return err
	}
	m.inFlight[name] = f
	return nil
}
