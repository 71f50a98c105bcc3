package otelpace

import (
	"context"
	"errors"
	"math"
	"sort"
	"sync"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics are gopherpace's instruments on one Meter, and the limiters and
// transports they observe. Its methods are safe for concurrent use.
type Metrics struct {
	meter metric.Meter
	inst  instruments
	fInst inFlightInstruments
	reg   metric.Registration

	mu         sync.Mutex
	limiters   map[string]*gopherpace.Limiter
	inFlight   map[string]*gopherpace.InFlight
	transports map[string]*transport
	closed     bool
}

// A TransportSource reports a transport's counters and gauges by name;
// memberpace.Transport is one.
type TransportSource interface {
	Metrics() (counters, gauges map[string]uint64)
}

type transport struct {
	src      TransportSource
	reg      metric.Registration
	counters map[string]metric.Int64ObservableCounter
	gauges   map[string]metric.Int64ObservableGauge
}

// New creates the limiter instruments on meter and registers the callback
// that observes them. Add limiters to it; Close unregisters it.
func New(meter metric.Meter) (*Metrics, error) {
	if meter == nil {
		return nil, errors.New("otelpace: nil Meter")
	}
	m := &Metrics{meter: meter, limiters: map[string]*gopherpace.Limiter{}, inFlight: map[string]*gopherpace.InFlight{}, transports: map[string]*transport{}}
	var err error
	if m.inst, err = newInstruments(meter); err != nil {
		return nil, err
	}
	if m.fInst, err = newInFlightInstruments(meter); err != nil {
		return nil, err
	}
	if m.reg, err = meter.RegisterCallback(m.observe, append(m.inst.all(), m.fInst.all()...)...); err != nil {
		return nil, err
	}
	return m, nil
}

// Add observes l under the attribute limiter=name (its policy's name, say:
// "login", "api"). Names must be unique among the limiters.
func (m *Metrics) Add(name string, l *gopherpace.Limiter) error {
	if name == "" || l == nil {
		return errors.New("otelpace: a limiter needs a name and a value")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.usable("limiter", name, m.limiters[name] != nil); err != nil {
		return err
	}
	m.limiters[name] = l
	return nil
}

// AddTransport observes t's counters and gauges under the attribute
// transport=name, as gopherpace.transport.<counter> (a counter) and
// gopherpace.transport.<gauge> (a gauge). The names are the ones t reports
// now; names it reports later are not observed.
func (m *Metrics) AddTransport(name string, t TransportSource) error {
	if name == "" || t == nil {
		return errors.New("otelpace: a transport needs a name and a value")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.usable("transport", name, m.transports[name] != nil); err != nil {
		return err
	}
	tr := &transport{src: t, counters: map[string]metric.Int64ObservableCounter{}, gauges: map[string]metric.Int64ObservableGauge{}}
	counters, gauges := t.Metrics()
	var observed []metric.Observable
	for _, k := range sortedKeys(counters) {
		c, err := m.meter.Int64ObservableCounter("gopherpace.transport."+k, metric.WithDescription("The transport's "+k+" counter."))
		if err != nil {
			return err
		}
		tr.counters[k] = c
		observed = append(observed, c)
	}
	for _, k := range sortedKeys(gauges) {
		g, err := m.meter.Int64ObservableGauge("gopherpace.transport."+k, metric.WithDescription("The transport's "+k+" gauge."))
		if err != nil {
			return err
		}
		tr.gauges[k] = g
		observed = append(observed, g)
	}
	attrs := metric.WithAttributes(attribute.String("transport", name))
	reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		counters, gauges := tr.src.Metrics()
		for k, c := range tr.counters {
			o.ObserveInt64(c, clamp(counters[k]), attrs)
		}
		for k, g := range tr.gauges {
			o.ObserveInt64(g, clamp(gauges[k]), attrs)
		}
		return nil
	}, observed...)
	if err != nil {
		return err
	}
	tr.reg = reg
	m.transports[name] = tr
	return nil
}

func (m *Metrics) usable(kind, name string, taken bool) error {
	switch {
	case m.closed:
		return errors.New("otelpace: Add after Close")
	case taken:
		return errors.New("otelpace: a " + kind + " named " + name + " is already added")
	}
	return nil
}

// Close unregisters every callback: the instruments report nothing more.
func (m *Metrics) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	errs := []error{m.reg.Unregister()}
	for _, t := range m.transports {
		errs = append(errs, t.reg.Unregister())
	}
	return errors.Join(errs...)
}

// observe reads every limiter's and in-flight limit's Stats once.
func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	m.mu.Lock()
	names := sortedKeys(m.limiters)
	limiters := make([]*gopherpace.Limiter, len(names))
	for i, n := range names {
		limiters[i] = m.limiters[n]
	}
	fnames := sortedKeys(m.inFlight)
	inFlight := make([]*gopherpace.InFlight, len(fnames))
	for i, n := range fnames {
		inFlight[i] = m.inFlight[n]
	}
	m.mu.Unlock()
	for i, l := range limiters {
		m.inst.observe(o, names[i], l)
	}
	for i, f := range inFlight {
		m.fInst.observe(o, fnames[i], f)
	}
	return nil
}

// clamp is a counter's value as OpenTelemetry's int64.
func clamp(v uint64) int64 { return int64(min(v, math.MaxInt64)) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
