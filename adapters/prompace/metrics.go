package prompace

import (
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/prometheus/client_golang/prometheus"
)

// The limiter metrics, one series per limiter (and per label value
// below). docs/operations.md lists them with the alerts worth setting.
var (
	requests = prometheus.NewDesc("gopherpace_requests_total",
		"Requests decided, by decision: allowed, denied, or shadowed (let through by shadow mode though the limit denied them).",
		[]string{"limiter", "decision"}, nil)
	tokensAllowed = prometheus.NewDesc("gopherpace_tokens_allowed_total",
		"Tokens spent by allowed requests.", []string{"limiter"}, nil)
	globalTokens = prometheus.NewDesc("gopherpace_global_tokens",
		"Tokens in this node's replica of the global bucket (below zero: debt).", []string{"limiter"}, nil)
	liveKeys = prometheus.NewDesc("gopherpace_keys_live",
		"Keyed buckets held (buckets that are not full).", []string{"limiter"}, nil)
	refundsRefused = prometheus.NewDesc("gopherpace_refunds_refused_total",
		"Refunds of more tokens than their key can have spent, refused whole: a bug, or a caller undoing others' spending.", []string{"limiter"}, nil)
	keysEvicted = prometheus.NewDesc("gopherpace_keys_evicted_total",
		"Keyed buckets evicted at the key cap to make room for new keys, those owing the fewest tokens first.", []string{"limiter"}, nil)
	limitTokens = prometheus.NewDesc("gopherpace_limit_tokens",
		"The default policy's rate: tokens per gopherpace_limit_period_seconds.", []string{"limiter"}, nil)
	limitPeriod = prometheus.NewDesc("gopherpace_limit_period_seconds",
		"The default policy's period.", []string{"limiter"}, nil)
	limitBucketSize = prometheus.NewDesc("gopherpace_limit_bucket_size_tokens",
		"The default policy's bucket size.", []string{"limiter"}, nil)
	clustered = prometheus.NewDesc("gopherpace_clustered",
		"1 when the limiter has a transport.", []string{"limiter"}, nil)
	peers = prometheus.NewDesc("gopherpace_cluster_peers",
		"Nodes of the cluster, this one included, by state: known (members within the grace period), visible (in sight), heard (frames within 1.5 gossip intervals).",
		[]string{"limiter", "state"}, nil)
	partitioned = prometheus.NewDesc("gopherpace_cluster_partitioned",
		"1 while fewer nodes are visible than known.", []string{"limiter"}, nil)
	frames = prometheus.NewDesc("gopherpace_gossip_frames_total",
		"Gossip frames, by direction.", []string{"limiter", "direction"}, nil)
	bytes = prometheus.NewDesc("gopherpace_gossip_bytes_total",
		"Gossip bytes, by direction, before transport framing.", []string{"limiter", "direction"}, nil)
	dropped = prometheus.NewDesc("gopherpace_gossip_frames_dropped_total",
		"Frames received and not applied, by reason.", []string{"limiter", "reason"}, nil)
	missing = prometheus.NewDesc("gopherpace_gossip_frames_missing_total",
		"Peers' frames that never arrived in any copy: their counts are lost.", []string{"limiter"}, nil)
	sendFailures = prometheus.NewDesc("gopherpace_gossip_send_failures_total",
		"Frames the transport refused to send.", []string{"limiter"}, nil)
	tokensGossip = prometheus.NewDesc("gopherpace_gossip_tokens_total",
		"Tokens reported to peers (admitted here) and charged from peers' reports, by direction.", []string{"limiter", "direction"}, nil)
	keysDropped = prometheus.NewDesc("gopherpace_gossip_keys_dropped_total",
		"Peers' keyed counts dropped because the key cap was reached.", []string{"limiter"}, nil)
	hotKeys = prometheus.NewDesc("gopherpace_cluster_hot_keys",
		"Keys shared by offered load now: a peer uses them while this node's copy is empty.", []string{"limiter"}, nil)
	relayed = prometheus.NewDesc("gopherpace_gossip_frames_relayed_total",
		"Other nodes' frames this node passed on in a grouped cluster (outcome relayed), or could not for want of room (dropped); shared by the limiters of a transport.",
		[]string{"limiter", "outcome"}, nil)
	topKeys = prometheus.NewDesc("gopherpace_top_keys_tokens",
		"With WithTopKeys: the tokens denied (list denied) or admitted (list admitted, sampled) over the last one to two minutes to the key at each rank, 1 the heaviest; the keys themselves are on the status page, never in a label.",
		[]string{"limiter", "list", "rank"}, nil)
	hotKeysRefused = prometheus.NewDesc("gopherpace_cluster_hot_keys_refused_total",
		"Keys not shared by offered load because 4,096 already were: they race for their tokens.", []string{"limiter"}, nil)
)

func collectLimiter(ch chan<- prometheus.Metric, name string, l *gopherpace.Limiter) {
	s := l.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{name}, labels...)...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{name}, labels...)...)
	}
	counter(requests, s.Allowed, "allowed")
	counter(requests, s.Denied, "denied")
	counter(requests, s.ShadowDenials, "shadowed")
	counter(tokensAllowed, s.TokensAllowed)
	gauge(globalTokens, float64(s.GlobalTokens))
	gauge(liveKeys, float64(s.LiveKeys))
	counter(keysEvicted, s.KeysEvicted)
	counter(refundsRefused, s.RefundsRefused)
	tokens, per := l.Rate()
	gauge(limitTokens, float64(tokens))
	gauge(limitPeriod, per.Seconds())
	gauge(limitBucketSize, float64(l.BucketSize()))
	gauge(clustered, b2f(s.Clustered))
	denied, admitted := l.TopKeys(TopRanks)
	for i, k := range denied {
		gauge(topKeys, float64(k.Count), "denied", rankLabels[i])
	}
	for i, k := range admitted {
		gauge(topKeys, float64(k.Count), "admitted", rankLabels[i])
	}
	if !s.Clustered {
		return
	}
	gauge(peers, float64(s.KnownNodes), "known")
	gauge(peers, float64(s.VisibleNodes), "visible")
	gauge(peers, float64(s.HeardNodes), "heard")
	gauge(partitioned, b2f(s.Partitioned))
	counter(frames, s.FramesSent, "sent")
	counter(frames, s.FramesReceived, "received")
	counter(bytes, s.BytesSent, "sent")
	counter(bytes, s.BytesReceived, "received")
	counter(dropped, s.FramesMalformed, "malformed")
	counter(dropped, s.FramesDuplicate, "duplicate")
	counter(dropped, s.FramesOtherLimiter, "other_limiter")
	counter(dropped, s.FramesNotMember, "not_member")
	counter(dropped, s.FramesOtherVersion, "other_version")
	counter(dropped, s.FramesOtherKeyHash, "other_key_hash")
	counter(missing, s.FramesMissing)
	counter(sendFailures, s.SendFailures)
	counter(tokensGossip, s.TokensReported, "reported")
	counter(tokensGossip, s.TokensCharged, "charged")
	counter(keysDropped, s.KeysDropped)
	gauge(hotKeys, float64(s.HotKeys))
	counter(hotKeysRefused, s.HotKeysRefused)
	counter(relayed, s.FramesRelayed, "relayed")
	counter(relayed, s.RelayDropped, "dropped")
}

// TopRanks is how many ranks of the top keys are exported: a fixed few,
// so that the series stay bounded whatever the keys.
const TopRanks = 5

var rankLabels = [TopRanks]string{"1", "2", "3", "4", "5"}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
