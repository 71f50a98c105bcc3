package prompace

import (
	"errors"
	"sort"
	"sync"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/prometheus/client_golang/prometheus"
)

// A Collector exports the decisions and the cluster view of limiters, and
// the counters of transports, as Prometheus metrics. Each scrape reads
// every limiter's Stats once; nothing is counted on the request path
// beyond what the limiters count anyway. Labels never carry keys: a key
// per client would make a series per client.
type Collector struct {
	mu         sync.Mutex
	limiters   map[string]*gopherpace.Limiter
	inFlight   map[string]*gopherpace.InFlight
	transports map[string]TransportSource
}

// A TransportSource reports a transport's counters and gauges by name;
// memberpace.Transport is one.
type TransportSource interface {
	Metrics() (counters, gauges map[string]uint64)
}

// New returns an empty Collector; register it with a prometheus.Registerer
// and Add limiters to it.
func New() *Collector {
	return &Collector{limiters: map[string]*gopherpace.Limiter{}, inFlight: map[string]*gopherpace.InFlight{}, transports: map[string]TransportSource{}}
}

// Add exports l under the label limiter=name (its policy's name, say:
// "login", "api"). Names must be unique within the collector.
func (c *Collector) Add(name string, l *gopherpace.Limiter) error {
	return addNamed(c, c.limiters, "limiter", name, l, l == nil)
}

// AddInFlight exports the in-flight limit f under the label limiter=name,
// as gopherpace_inflight_* series (docs/operations.md). Names must be
// unique among the in-flight limits.
func (c *Collector) AddInFlight(name string, f *gopherpace.InFlight) error {
	return addNamed(c, c.inFlight, "in-flight limit", name, f, f == nil)
}

// AddTransport exports t's counters and gauges under the label
// transport=name.
func (c *Collector) AddTransport(name string, t TransportSource) error {
	return addNamed(c, c.transports, "transport", name, t, t == nil)
}

func addNamed[V any](c *Collector, m map[string]V, kind, name string, v V, isNil bool) error {
	if name == "" || isNil {
		return errors.New("prompace: a " + kind + " needs a name and a value")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := m[name]; dup {
		return errors.New("prompace: a " + kind + " named " + name + " is already added")
	}
	m[name] = v
	return nil
}

// Describe sends one description per name added so far, which the
// Collector never collects: a registry then refuses a second Collector
// that has a limiter or transport of the same name, at Register, instead
// of failing every scrape with duplicate series. Add every limiter before
// registering; a name added later is not checked. A Collector with nothing
// added is unchecked.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range sortedKeys(c.limiters) {
		ch <- prometheus.NewDesc("gopherpace_collector_limiter", "A limiter a prompace Collector exports.", nil, prometheus.Labels{"limiter": n})
	}
	for _, n := range sortedKeys(c.inFlight) {
		ch <- prometheus.NewDesc("gopherpace_collector_inflight", "An in-flight limit a prompace Collector exports.", nil, prometheus.Labels{"limiter": n})
	}
	for _, n := range sortedKeys(c.transports) {
		ch <- prometheus.NewDesc("gopherpace_collector_transport", "A transport a prompace Collector exports.", nil, prometheus.Labels{"transport": n})
	}
}

// Collect reads every limiter and transport once.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	names := sortedKeys(c.limiters)
	limiters := make([]*gopherpace.Limiter, len(names))
	for i, n := range names {
		limiters[i] = c.limiters[n]
	}
	fnames := sortedKeys(c.inFlight)
	inFlight := make([]*gopherpace.InFlight, len(fnames))
	for i, n := range fnames {
		inFlight[i] = c.inFlight[n]
	}
	tnames := sortedKeys(c.transports)
	transports := make([]TransportSource, len(tnames))
	for i, n := range tnames {
		transports[i] = c.transports[n]
	}
	c.mu.Unlock()
	for i, l := range limiters {
		collectLimiter(ch, names[i], l)
	}
	for i, f := range inFlight {
		collectInFlight(ch, fnames[i], f)
	}
	for i, t := range transports {
		counters, gauges := t.Metrics()
		for _, k := range sortedKeys(counters) {
			d := prometheus.NewDesc("gopherpace_transport_"+k+"_total", "The transport's "+k+" counter.", []string{"transport"}, nil)
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(counters[k]), tnames[i])
		}
		for _, k := range sortedKeys(gauges) {
			d := prometheus.NewDesc("gopherpace_transport_"+k, "The transport's "+k+" gauge.", []string{"transport"}, nil)
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(gauges[k]), tnames[i])
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
