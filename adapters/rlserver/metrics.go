package rlserver

import (
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/adapters/memberpace"
	"github.com/pedreviljoen/gopherpace/adapters/prompace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/connlimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// The outcomes of a ShouldRateLimit call, as the label of
// gopherpace_rls_requests_total.
const (
	outcomeOK            = "ok"
	outcomeOverLimit     = "over_limit"
	outcomeBadRequest    = "invalid"
	outcomeUnknownDomain = "unknown_domain"
	// outcomeShadowDenied: over the limit, answered OK (-shadow-mode).
	outcomeShadowDenied = "shadow_denied"
)

// logEvery is the least time between two log records of one kind that
// a caller can cause.
const logEvery = 30 * time.Second

// serviceMetrics are the server's Prometheus metrics: prompace's for the
// HTTP API's limiter, the transport and every rule's limiter (limiter=the
// rule's id), and the service's own counters. A reload changes the set of
// rule limiters, so the prompace collector is rebuilt and swapped.
type serviceMetrics struct {
	reg       *prometheus.Registry
	http      *gopherpace.Limiter
	transport *memberpace.Transport

	requests    *prometheus.CounterVec
	outcomes    map[string]prometheus.Counter // requests' children, looked up once
	configLoads *prometheus.CounterVec
	silentCalls prometheus.Counter

	mu        sync.Mutex
	collector *prompace.Collector

	lastUnknown atomic.Int64 // unix nanos of the last unknown-domain record
}

func newServiceMetrics(http *gopherpace.Limiter, transport *memberpace.Transport) (*serviceMetrics, error) {
	m := &serviceMetrics{
		reg: prometheus.NewRegistry(), http: http, transport: transport,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gopherpace_rls_requests_total",
			Help: "ShouldRateLimit calls by outcome: ok, over_limit, invalid (refused, nothing spent), unknown_domain (answered OK: no limits for it), shadow_denied (over the limit, answered OK by -shadow-mode).",
		}, []string{"outcome"}),
		configLoads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gopherpace_rls_config_loads_total",
			Help: "Loads of the -config file by result: loaded, or refused (the limits before it stay).",
		}, []string{"result"}),
	}
	m.silentCalls = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gopherpace_grpc_silent_calls_total",
		Help: "gRPC calls ended because they sent no request message within " + firstMessageTimeout.String() + ".",
	})
	m.outcomes = map[string]prometheus.Counter{}
	for _, o := range []string{outcomeOK, outcomeOverLimit, outcomeBadRequest, outcomeUnknownDomain, outcomeShadowDenied} {
		m.outcomes[o] = m.requests.WithLabelValues(o)
	}
	m.configLoads.WithLabelValues("loaded")
	m.configLoads.WithLabelValues("refused")
	if err := m.reg.Register(m.requests); err != nil {
		return nil, err
	}
	if err := m.reg.Register(m.configLoads); err != nil {
		return nil, err
	}
	if err := m.reg.Register(m.silentCalls); err != nil {
		return nil, err
	}
	// Go's runtime and the process (go_*, process_*), as every Go service
	// exports them: memory, garbage collection, goroutines, CPU time, file
	// descriptors.
	if err := m.reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := m.reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	if err := m.setLimiters(nil); err != nil {
		return nil, err
	}
	return m, nil
}

// setLimiters exports the HTTP limiter, the transport and rules.
func (m *serviceMetrics) setLimiters(rules map[string]*gopherpace.Limiter) error {
	c := prompace.New()
	if err := c.Add("service", m.http); err != nil {
		return err
	}
	if m.transport != nil {
		if err := c.AddTransport("memberlist", m.transport); err != nil {
			return err
		}
	}
	ids := make([]string, 0, len(rules))
	for id := range rules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := c.Add(id, rules[id]); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.collector != nil {
		m.reg.Unregister(m.collector)
	}
	if err := m.reg.Register(c); err != nil {
		return err
	}
	m.collector = c
	return nil
}

func (m *serviceMetrics) count(outcome string) {
	if m != nil {
		m.outcomes[outcome].Inc()
	}
}

func (m *serviceMetrics) configLoaded(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.configLoads.WithLabelValues("loaded").Inc()
	} else {
		m.configLoads.WithLabelValues("refused").Inc()
	}
}

// unknownDomain logs a request for a domain without limits, at most once
// every logEvery.
func (m *serviceMetrics) unknownDomain(log *slog.Logger, domain string) {
	if m == nil || log == nil {
		return
	}
	now := time.Now().UnixNano()
	last := m.lastUnknown.Load()
	if now-last < int64(logEvery) || !m.lastUnknown.CompareAndSwap(last, now) {
		return
	}
	log.Warn("rate limit request for a domain the config has no limits for: answered OK", "domain", truncate(domain, 64))
}

func (m *serviceMetrics) silentCall() {
	if m != nil {
		m.silentCalls.Inc()
	}
}

// addListeners exports the connection caps' counts, labelled by listener
// name.
func (m *serviceMetrics) addListeners(ls map[string]*connlimit.Listener) error {
	return m.reg.Register(listenerCollector(ls))
}

var (
	connsOpen = prometheus.NewDesc("gopherpace_connections_open",
		"Connections open on the listener.", []string{"listener"}, nil)
	connsReclaimed = prometheus.NewDesc("gopherpace_connections_reclaimed_total",
		"Connections closed to make room for new ones at the listener's caps (-max-conns, -max-conns-per-client): the longest idle first.", []string{"listener"}, nil)
	connsRefused = prometheus.NewDesc("gopherpace_connections_refused_total",
		"New connections closed at once: their client was at its cap with every connection busy.", []string{"listener"}, nil)
)

type listenerCollector map[string]*connlimit.Listener

func (c listenerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- connsOpen
	ch <- connsReclaimed
	ch <- connsRefused
}

func (c listenerCollector) Collect(ch chan<- prometheus.Metric) {
	for name, l := range c {
		s := l.Stats()
		ch <- prometheus.MustNewConstMetric(connsOpen, prometheus.GaugeValue, float64(s.Open), name)
		ch <- prometheus.MustNewConstMetric(connsReclaimed, prometheus.CounterValue, float64(s.Reclaimed), name)
		ch <- prometheus.MustNewConstMetric(connsRefused, prometheus.CounterValue, float64(s.Refused), name)
	}
}

var ruleDecisions = prometheus.NewDesc("gopherpace_rls_rule_decisions_total",
	"Descriptors each rule of -config decided, by outcome: ok, over_limit, shadow_denied (a shadow rule's denial, answered OK). Only with -rule-metrics.",
	[]string{"rule", "outcome"}, nil)

// ruleCollector exports each rule's outcomes (-rule-metrics), the rules of
// the config in force when scraped.
type ruleCollector struct{ s *rlsService }

func (c ruleCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ruleDecisions
	describeStats(ch)
}

func (c ruleCollector) Collect(ch chan<- prometheus.Metric) {
	set := c.s.rules.Load()
	if set == nil {
		return
	}
	c.s.stats.collect(ch, set.cfg)
	for id, r := range set.cfg.rules {
		if r.unlimited {
			continue
		}
		for o, name := range [ruleOutcomes]string{ruleOK: "ok", ruleOverLimit: "over_limit", ruleShadowDenied: "shadow_denied"} {
			ch <- prometheus.MustNewConstMetric(ruleDecisions, prometheus.CounterValue, float64(r.decisions[o].Load()), id, name)
		}
	}
}
