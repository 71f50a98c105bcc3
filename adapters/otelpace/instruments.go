package otelpace

import (
	"strconv"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The limiter instruments, one stream per limiter (and per attribute value
// below). docs/operations.md lists them beside prompace's names.
type instruments struct {
	requests, tokensAllowed, keysEvicted, refundsRefused            metric.Int64ObservableCounter
	globalTokens, liveKeys, limitTokens, limitBucketSize, clustered metric.Int64ObservableGauge
	limitPeriod                                                     metric.Float64ObservableGauge
	peers, partitioned                                              metric.Int64ObservableGauge
	frames, bytes, dropped, missing, sendFailures, tokensGossip     metric.Int64ObservableCounter
	keysDropped, hotKeysRefused, relayed                            metric.Int64ObservableCounter
	hotKeys, topKeys                                                metric.Int64ObservableGauge
}

// TopRanks is how many ranks of the top keys are observed: a fixed few,
// so that the streams stay bounded whatever the keys.
const TopRanks = 5

// builder makes instruments on a Meter. The first error stops the rest:
// each later call then does nothing, and err says what failed.
type builder struct {
	m   metric.Meter
	err error
}

func (b *builder) counter(name, unit, desc string) metric.Int64ObservableCounter {
	if b.err != nil {
		return nil
	}
	var c metric.Int64ObservableCounter
	c, b.err = b.m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return c
}

func (b *builder) gauge(name, unit, desc string) metric.Int64ObservableGauge {
	if b.err != nil {
		return nil
	}
	var g metric.Int64ObservableGauge
	g, b.err = b.m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return g
}

func newInstruments(m metric.Meter) (in instruments, _ error) {
	b := &builder{m: m}
	counter, gauge := b.counter, b.gauge
	in.requests = counter("gopherpace.requests", "{request}",
		"Requests decided, by decision: allowed, denied, or shadowed (let through by shadow mode though the limit denied them).")
	in.tokensAllowed = counter("gopherpace.tokens.allowed", "{token}", "Tokens spent by allowed requests.")
	in.globalTokens = gauge("gopherpace.global.tokens", "{token}", "Tokens in this node's replica of the global bucket (below zero: debt).")
	in.liveKeys = gauge("gopherpace.keys.live", "{bucket}", "Keyed buckets held (buckets that are not full).")
	in.keysEvicted = counter("gopherpace.keys.evicted", "{bucket}",
		"Keyed buckets evicted at the key cap to make room for new keys, those owing the fewest tokens first.")
	in.refundsRefused = counter("gopherpace.refunds.refused", "{refund}",
		"Refunds of more tokens than their key can have spent, refused whole: a bug, or a caller undoing others' spending.")
	in.limitTokens = gauge("gopherpace.limit.tokens", "{token}", "The default policy's rate: tokens per gopherpace.limit.period.")
	if b.err == nil {
		in.limitPeriod, b.err = m.Float64ObservableGauge("gopherpace.limit.period", metric.WithUnit("s"),
			metric.WithDescription("The default policy's period."))
	}
	in.limitBucketSize = gauge("gopherpace.limit.bucket_size", "{token}", "The default policy's bucket size.")
	in.clustered = gauge("gopherpace.clustered", "", "1 when the limiter has a transport.")
	in.peers = gauge("gopherpace.cluster.peers", "{node}",
		"Nodes of the cluster, this one included, by state: known (members within the grace period), visible (in sight), heard (frames within 1.5 gossip intervals).")
	in.partitioned = gauge("gopherpace.cluster.partitioned", "", "1 while fewer nodes are visible than known.")
	in.frames = counter("gopherpace.gossip.frames", "{frame}", "Gossip frames, by direction.")
	in.bytes = counter("gopherpace.gossip.io", "By", "Gossip bytes, by direction, before transport framing.")
	in.dropped = counter("gopherpace.gossip.frames.dropped", "{frame}", "Frames received and not applied, by reason.")
	in.missing = counter("gopherpace.gossip.frames.missing", "{frame}", "Peers' frames that never arrived in any copy: their counts are lost.")
	in.sendFailures = counter("gopherpace.gossip.send_failures", "{frame}", "Frames the transport refused to send.")
	in.tokensGossip = counter("gopherpace.gossip.tokens", "{token}",
		"Tokens reported to peers (admitted here) and charged from peers' reports, by direction.")
	in.keysDropped = counter("gopherpace.gossip.keys.dropped", "{key}", "Peers' keyed counts dropped because the key cap was reached.")
	in.hotKeys = gauge("gopherpace.cluster.hot_keys", "{key}", "Keys shared by offered load now: a peer uses them while this node's copy is empty.")
	in.hotKeysRefused = counter("gopherpace.cluster.hot_keys.refused", "{key}",
		"Keys not shared by offered load because 4,096 already were: they race for their tokens.")
	in.topKeys = gauge("gopherpace.top_keys.tokens", "{token}",
		"With WithTopKeys: the tokens denied (list denied) or admitted (list admitted, sampled) over the last one to two minutes to the key at each rank, 1 the heaviest; the keys themselves are on the status page, never in an attribute.")
	in.relayed = counter("gopherpace.gossip.frames.relayed", "{frame}",
		"Other nodes' frames this node passed on in a grouped cluster (outcome relayed), or could not for want of room (dropped); shared by the limiters of a transport.")
	return in, b.err
}

func (in *instruments) all() []metric.Observable {
	return []metric.Observable{
		in.requests, in.tokensAllowed, in.globalTokens, in.liveKeys, in.keysEvicted, in.refundsRefused, in.limitTokens, in.limitPeriod,
		in.limitBucketSize, in.clustered, in.peers, in.partitioned, in.frames, in.bytes, in.dropped, in.missing,
		in.sendFailures, in.tokensGossip, in.keysDropped, in.hotKeys, in.hotKeysRefused, in.relayed, in.topKeys,
	}
}

// limiterAttrs are the attributes of the streams of the limit named
// name: the pair itself, the option of it alone, and of it with one more.
func limiterAttrs(name string) (lim attribute.KeyValue, one metric.ObserveOption, by func(key, value string) metric.ObserveOption) {
	lim = attribute.String("limiter", name)
	return lim, metric.WithAttributes(lim), func(key, value string) metric.ObserveOption {
		return metric.WithAttributes(lim, attribute.String(key, value))
	}
}

// observe reads l's Stats once and observes every instrument.
func (in *instruments) observe(o metric.Observer, name string, l *gopherpace.Limiter) {
	s := l.Stats()
	lim, one, by := limiterAttrs(name)
	o.ObserveInt64(in.requests, clamp(s.Allowed), by("decision", "allowed"))
	o.ObserveInt64(in.requests, clamp(s.Denied), by("decision", "denied"))
	o.ObserveInt64(in.requests, clamp(s.ShadowDenials), by("decision", "shadowed"))
	o.ObserveInt64(in.tokensAllowed, clamp(s.TokensAllowed), one)
	o.ObserveInt64(in.globalTokens, s.GlobalTokens, one)
	o.ObserveInt64(in.liveKeys, int64(s.LiveKeys), one)
	o.ObserveInt64(in.keysEvicted, clamp(s.KeysEvicted), one)
	o.ObserveInt64(in.refundsRefused, clamp(s.RefundsRefused), one)
	tokens, per := l.Rate()
	o.ObserveInt64(in.limitTokens, tokens, one)
	o.ObserveFloat64(in.limitPeriod, per.Seconds(), one)
	o.ObserveInt64(in.limitBucketSize, l.BucketSize(), one)
	o.ObserveInt64(in.clustered, b2i(s.Clustered), one)
	denied, admitted := l.TopKeys(TopRanks)
	for i, k := range denied {
		o.ObserveInt64(in.topKeys, clamp(k.Count), metric.WithAttributes(lim, attribute.String("list", "denied"), attribute.String("rank", strconv.Itoa(i+1))))
	}
	for i, k := range admitted {
		o.ObserveInt64(in.topKeys, clamp(k.Count), metric.WithAttributes(lim, attribute.String("list", "admitted"), attribute.String("rank", strconv.Itoa(i+1))))
	}
	if !s.Clustered {
		return
	}
	o.ObserveInt64(in.peers, int64(s.KnownNodes), by("state", "known"))
	o.ObserveInt64(in.peers, int64(s.VisibleNodes), by("state", "visible"))
	o.ObserveInt64(in.peers, int64(s.HeardNodes), by("state", "heard"))
	o.ObserveInt64(in.partitioned, b2i(s.Partitioned), one)
	o.ObserveInt64(in.frames, clamp(s.FramesSent), by("direction", "sent"))
	o.ObserveInt64(in.frames, clamp(s.FramesReceived), by("direction", "received"))
	o.ObserveInt64(in.bytes, clamp(s.BytesSent), by("direction", "sent"))
	o.ObserveInt64(in.bytes, clamp(s.BytesReceived), by("direction", "received"))
	o.ObserveInt64(in.dropped, clamp(s.FramesMalformed), by("reason", "malformed"))
	o.ObserveInt64(in.dropped, clamp(s.FramesDuplicate), by("reason", "duplicate"))
	o.ObserveInt64(in.dropped, clamp(s.FramesOtherLimiter), by("reason", "other_limiter"))
	o.ObserveInt64(in.dropped, clamp(s.FramesNotMember), by("reason", "not_member"))
	o.ObserveInt64(in.dropped, clamp(s.FramesOtherVersion), by("reason", "other_version"))
	o.ObserveInt64(in.dropped, clamp(s.FramesOtherKeyHash), by("reason", "other_key_hash"))
	o.ObserveInt64(in.missing, clamp(s.FramesMissing), one)
	o.ObserveInt64(in.sendFailures, clamp(s.SendFailures), one)
	o.ObserveInt64(in.tokensGossip, clamp(s.TokensReported), by("direction", "reported"))
	o.ObserveInt64(in.tokensGossip, clamp(s.TokensCharged), by("direction", "charged"))
	o.ObserveInt64(in.keysDropped, clamp(s.KeysDropped), one)
	o.ObserveInt64(in.hotKeys, s.HotKeys, one)
	o.ObserveInt64(in.hotKeysRefused, clamp(s.HotKeysRefused), one)
	o.ObserveInt64(in.relayed, clamp(s.FramesRelayed), by("outcome", "relayed"))
	o.ObserveInt64(in.relayed, clamp(s.RelayDropped), by("outcome", "dropped"))
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
