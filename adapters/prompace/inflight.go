package prompace

import (
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/prometheus/client_golang/prometheus"
)

// The in-flight limits' metrics, one series per limit (and per label
// value below); docs/operations.md lists them.
var (
	inFlightRequests = prometheus.NewDesc("gopherpace_inflight_requests_total",
		"Requests asked of an in-flight limit, by decision: acquired (a slot taken) or refused (none free).", []string{"limiter", "decision"}, nil)
	inFlightCapped = prometheus.NewDesc("gopherpace_inflight_capped_total",
		"Refused requests (among the refused) for which a slot was free beyond this node's share, but it had taken its local cap of those this tick.", []string{"limiter"}, nil)
	inFlightHeld = prometheus.NewDesc("gopherpace_inflight_held",
		"The keyless limit's requests in flight, by scope: node (this one's) or cluster (as this node knows it).", []string{"limiter", "scope"}, nil)
	inFlightLimit = prometheus.NewDesc("gopherpace_inflight_limit",
		"The most requests in flight per key.", []string{"limiter"}, nil)
	inFlightPeers = prometheus.NewDesc("gopherpace_inflight_peers",
		"Peers this node has heard from.", []string{"limiter"}, nil)
	inFlightFrames = prometheus.NewDesc("gopherpace_inflight_frames_total",
		"Gauge frames sent (direction sent) and peers' frames not used, whole or in part (direction dropped).", []string{"limiter", "direction"}, nil)
	inFlightPeerKeysDropped = prometheus.NewDesc("gopherpace_inflight_peer_keys_dropped_total",
		"Peers' keys beyond WithMaxKeys, not counted.", []string{"limiter"}, nil)
)

func collectInFlight(ch chan<- prometheus.Metric, name string, f *gopherpace.InFlight) {
	s := f.Stats()
	send := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, append([]string{name}, labels...)...)
	}
	send(inFlightRequests, prometheus.CounterValue, float64(s.Acquired), "acquired")
	send(inFlightRequests, prometheus.CounterValue, float64(s.Refused), "refused")
	send(inFlightCapped, prometheus.CounterValue, float64(s.Capped))
	send(inFlightHeld, prometheus.GaugeValue, float64(s.Held), "node")
	send(inFlightHeld, prometheus.GaugeValue, float64(s.ClusterHeld), "cluster")
	send(inFlightLimit, prometheus.GaugeValue, float64(f.Limit()))
	send(inFlightPeers, prometheus.GaugeValue, float64(s.Peers))
	send(inFlightFrames, prometheus.CounterValue, float64(s.FramesSent), "sent")
	send(inFlightFrames, prometheus.CounterValue, float64(s.FramesDropped), "dropped")
	send(inFlightPeerKeysDropped, prometheus.CounterValue, float64(s.PeerKeysDropped))
}
