package rlserver

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
)

// With -rule-metrics, each descriptor's hits are counted as
// envoyproxy/ratelimit counts them, under its stats keys, so that
// dashboards and alerts built on its stats read the same numbers:
// ratelimit.service.rate_limit.<key>.<stat> there is
// gopherpace_rls_hits_total{key="<key>",stat="<stat>"} here. The key is
// the rule's path ("edge.path_/login"); a rule with detailed_metric puts
// every value of the request in it, and a depth with value_to_metric its
// value. Keys built from requests' values are bounded (maxStatKeys): past
// the cap a new key's hits are dropped and counted.

// The stats of a descriptor's hits, by envoyproxy/ratelimit's names.
const (
	statTotalHits = iota
	statOverLimit
	statNearLimit
	statWithinLimit
	statShadowMode
	statKinds
)

var statNames = [statKinds]string{"total_hits", "over_limit", "near_limit", "within_limit", "shadow_mode"}

// statCounts are one stats key's counts.
type statCounts [statKinds]atomic.Uint64

// The bounds on keys built from what callers send.
const (
	maxStatKeys       = 10_000
	maxUnknownDomains = 100
)

// DefaultNearLimitRatio is where a hit within the limit also counts as
// near it: past this share of the bucket spent (envoyproxy/ratelimit's
// NEAR_LIMIT_RATIO).
const DefaultNearLimitRatio = 0.8

// descriptorStats holds the counts of keys built per request and of
// unknown domains, each bounded; the counts of a rule's own key are on
// the rule.
type descriptorStats struct {
	nearRatio float64
	mu        sync.Mutex
	keys      map[string]*statCounts
	domains   map[string]*atomic.Uint64
	dropped   atomic.Uint64 // hits of keys past the caps
}

func newDescriptorStats(nearRatio float64) *descriptorStats {
	return &descriptorStats{nearRatio: nearRatio, keys: map[string]*statCounts{}, domains: map[string]*atomic.Uint64{}}
}

// hit counts one descriptor's decision.
func (s *descriptorStats) hit(cfg *rlsConfig, domain string, entries []*rlv3.RateLimitDescriptor_Entry, c *checked) {
	if c.rule == nil || c.refund {
		return
	}
	counts := &c.rule.hits
	if c.rule.valuesInStats {
		if counts = s.key(cfg.statKey(domain, entries, c.rule)); counts == nil {
			s.dropped.Add(uint64(c.hits))
			return
		}
	}
	h := uint64(c.hits)
	counts[statTotalHits].Add(h)
	switch r := c.rule; {
	case r.unlimited:
	case c.over:
		counts[statOverLimit].Add(h)
	case r.shadow && c.hits > 0 && (c.l == nil || !c.d.Allowed):
		counts[statShadowMode].Add(h)
	default:
		counts[statWithinLimit].Add(h)
		if size := c.d.BucketSize; size > 0 && size-max(c.d.Remaining, 0) > int64(math.Floor(float64(size)*s.nearRatio)) {
			counts[statNearLimit].Add(h)
		}
	}
}

// key is the counts of a key built from a request, nil past the cap.
func (s *descriptorStats) key(k string) *statCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.keys[k]; c != nil {
		return c
	}
	if len(s.keys) >= maxStatKeys {
		return nil
	}
	c := new(statCounts)
	s.keys[k] = c
	return c
}

// unknownDomain counts a request for a domain the config lacks.
func (s *descriptorStats) unknownDomain(domain string) {
	s.mu.Lock()
	c := s.domains[domain]
	if c == nil && len(s.domains) < maxUnknownDomains {
		c = new(atomic.Uint64)
		s.domains[domain] = c
	}
	s.mu.Unlock()
	if c == nil {
		s.dropped.Add(1)
		return
	}
	c.Add(1)
}

// statKey is rule r's stats key for a request's entries, as
// envoyproxy/ratelimit builds it: the domain, then each depth's name as
// the file gives it, or, with detailed_metric (every depth) or
// value_to_metric (that depth), the request's key and value.
func (c *rlsConfig) statKey(domain string, entries []*rlv3.RateLimitDescriptor_Entry, r *rule) string {
	var b strings.Builder
	b.WriteString(domain)
	level := c.domains[domain]
	for _, e := range entries {
		var node *descriptorNode
		if level != nil {
			node, _ = level.lookup(e.Key, e.Value)
		}
		b.WriteByte('.')
		switch {
		case r.detailed || node == nil || node.valueToMetric:
			b.WriteString(e.Key)
			if e.Value != "" {
				b.WriteByte('_')
				b.WriteString(e.Value)
			}
		default:
			b.WriteString(node.finalKey)
		}
		if node == nil || len(node.next) == 0 {
			level = nil
		} else {
			level = &node.descriptorLevel
		}
	}
	return b.String()
}

var (
	hitsDesc = prometheus.NewDesc("gopherpace_rls_hits_total",
		"Hits of each descriptor by envoyproxy/ratelimit's stats key and stat (total_hits, over_limit, near_limit, within_limit, shadow_mode). Only with -rule-metrics.",
		[]string{"key", "stat"}, nil)
	domainNotFoundDesc = prometheus.NewDesc("gopherpace_rls_domain_not_found_total",
		"Requests for a domain the config has no limits for, by domain (at most 100 domains). Only with -rule-metrics.",
		[]string{"domain"}, nil)
	statsDroppedDesc = prometheus.NewDesc("gopherpace_rls_stats_dropped_total",
		"Hits not counted under a key of their own: past 10,000 keys built from requests' values, or 100 unknown domains. Only with -rule-metrics.",
		nil, nil)
)

// each calls key for every stats key's counts (the rules' own keys of set,
// and those built from values) and domain for each unknown domain's.
func (s *descriptorStats) each(set *ruleSet, key func(string, *statCounts), domain func(string, uint64)) {
	if set != nil {
		for id, r := range set.cfg.rules {
			if !r.valuesInStats {
				key(id, &r.hits)
			}
		}
	}
	s.mu.Lock()
	keys := make(map[string]*statCounts, len(s.keys))
	for k, c := range s.keys {
		keys[k] = c
	}
	domains := make(map[string]uint64, len(s.domains))
	for d, n := range s.domains {
		domains[d] = n.Load()
	}
	s.mu.Unlock()
	for k, c := range keys {
		key(k, c)
	}
	for d, n := range domains {
		domain(d, n)
	}
}

// describeStats and collectStats export the stats (ruleCollector).
func describeStats(ch chan<- *prometheus.Desc) {
	ch <- hitsDesc
	ch <- domainNotFoundDesc
	ch <- statsDroppedDesc
}

func (s *descriptorStats) collect(ch chan<- prometheus.Metric, cfg *rlsConfig) {
	emit := func(key string, counts *statCounts) {
		for i, name := range statNames {
			ch <- prometheus.MustNewConstMetric(hitsDesc, prometheus.CounterValue, float64(counts[i].Load()), key, name)
		}
	}
	if cfg != nil {
		for id, r := range cfg.rules {
			if !r.valuesInStats {
				emit(id, &r.hits)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, counts := range s.keys {
		emit(k, counts)
	}
	for d, n := range s.domains {
		ch <- prometheus.MustNewConstMetric(domainNotFoundDesc, prometheus.CounterValue, float64(n.Load()), d)
	}
	ch <- prometheus.MustNewConstMetric(statsDroppedDesc, prometheus.CounterValue, float64(s.dropped.Load()))
}
