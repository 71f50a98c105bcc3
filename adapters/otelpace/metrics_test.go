package otelpace_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/adapters/otelpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newLimiter(t *testing.T, opts ...gopherpace.Option) *gopherpace.Limiter {
	t.Helper()
	l, err := gopherpace.New(append([]gopherpace.Option{gopherpace.WithRate(3, time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// point finds the value of instrument name whose attributes include every
// pair in attrs ("limiter", "api", ...); ok is false if there is none.
func point(rm metricdata.ResourceMetrics, name string, attrs ...string) (v float64, ok bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				return find(d.DataPoints, attrs)
			case metricdata.Gauge[int64]:
				return find(d.DataPoints, attrs)
			case metricdata.Gauge[float64]:
				return find(d.DataPoints, attrs)
			}
		}
	}
	return 0, false
}

func find[N int64 | float64](points []metricdata.DataPoint[N], attrs []string) (float64, bool) {
next:
	for _, p := range points {
		for i := 0; i+1 < len(attrs); i += 2 {
			if v, ok := p.Attributes.Value(attribute.Key(attrs[i])); !ok || v.AsString() != attrs[i+1] {
				continue next
			}
		}
		return float64(p.Value), true
	}
	return 0, false
}

func collect(t *testing.T, r *sdkmetric.ManualReader) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

func newMetrics(t *testing.T) (*otelpace.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	m, err := otelpace.New(provider.Meter("otelpace_test"))
	if err != nil {
		t.Fatal(err)
	}
	return m, r
}

// Each collection reads the limiter's Stats: the decisions made since the
// last, the policy, and no cluster streams for a standalone limiter.
func TestObservesAStandaloneLimiter(t *testing.T) {
	m, r := newMetrics(t)
	l := newLimiter(t)
	if err := m.Add("api", l); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	for range 4 {
		l.AllowAt(at)
	}
	rm := collect(t, r)
	for _, want := range []struct {
		name  string
		attrs []string
		value float64
	}{
		{"gopherpace.requests", []string{"limiter", "api", "decision", "allowed"}, 3},
		{"gopherpace.requests", []string{"limiter", "api", "decision", "denied"}, 1},
		{"gopherpace.requests", []string{"limiter", "api", "decision", "shadowed"}, 0},
		{"gopherpace.tokens.allowed", []string{"limiter", "api"}, 3},
		{"gopherpace.limit.tokens", []string{"limiter", "api"}, 3},
		{"gopherpace.limit.period", []string{"limiter", "api"}, 1},
		{"gopherpace.limit.bucket_size", []string{"limiter", "api"}, 3},
		{"gopherpace.clustered", []string{"limiter", "api"}, 0},
	} {
		if v, ok := point(rm, want.name, want.attrs...); !ok || v != want.value {
			t.Errorf("%s%v = %v (found %v), want %v", want.name, want.attrs, v, ok, want.value)
		}
	}
	if _, ok := point(rm, "gopherpace.cluster.peers"); ok {
		t.Error("a standalone limiter reports cluster peers")
	}
	l.AllowAt(at)
	if v, _ := point(collect(t, r), "gopherpace.requests", "limiter", "api", "decision", "denied"); v != 2 {
		t.Errorf("denied after one more: %v, want 2 (the counter is cumulative)", v)
	}
}

// With WithTopKeys the tokens of the heaviest keys are observed by rank,
// never by key: a fixed few streams whatever the keys.
func TestObservesTheTopKeysByRank(t *testing.T) {
	m, r := newMetrics(t)
	l := newLimiter(t, gopherpace.WithTopKeys(true))
	if err := m.Add("api", l); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	for i := range 8 {
		for range 4 + i*10 {
			l.TakeAt(at, fmt.Sprint("tenant-", i), 1)
		}
	}
	rm := collect(t, r)
	// tenant-7 sent 74 and was admitted 3: 71 denied; tenant-6 61...
	for rank, want := range []float64{71, 61, 51, 41, 31} {
		if v, ok := point(rm, "gopherpace.top_keys.tokens", "limiter", "api", "list", "denied", "rank", strconv.Itoa(rank+1)); !ok || v != want {
			t.Errorf("rank %d: %v (found %v), want %v", rank+1, v, ok, want)
		}
	}
	if _, ok := point(rm, "gopherpace.top_keys.tokens", "rank", "6"); ok {
		t.Error("a sixth rank is observed")
	}
}

// A clustered limiter adds the cluster's view and the gossip counters.
func TestObservesAClusteredLimiter(t *testing.T) {
	m, r := newMetrics(t)
	net := memtransport.New(memtransport.WithRealTime())
	var ls []*gopherpace.Limiter
	for _, name := range []string{"a", "b"} {
		tr, err := net.Join(name)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, newLimiter(t, gopherpace.WithTransport(tr)))
	}
	if err := m.Add("api", ls[0]); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ls[0].Stats().HeardNodes < 2 || ls[0].Stats().FramesReceived == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the nodes never heard each other")
		}
	}
	rm := collect(t, r)
	if v, ok := point(rm, "gopherpace.cluster.peers", "limiter", "api", "state", "heard"); !ok || v < 2 {
		t.Errorf("heard peers %v (%v), want 2", v, ok)
	}
	if v, ok := point(rm, "gopherpace.gossip.frames", "limiter", "api", "direction", "received"); !ok || v < 1 {
		t.Errorf("frames received %v (%v)", v, ok)
	}
	if v, ok := point(rm, "gopherpace.clustered", "limiter", "api"); !ok || v != 1 {
		t.Errorf("clustered %v (%v)", v, ok)
	}
}

type fakeTransport struct{ sent uint64 }

func (f *fakeTransport) Metrics() (map[string]uint64, map[string]uint64) {
	return map[string]uint64{"packets_sent": f.sent}, map[string]uint64{"members": 3}
}

// A transport's counters and gauges come out under its name.
func TestObservesATransport(t *testing.T) {
	m, r := newMetrics(t)
	tr := &fakeTransport{sent: 7}
	if err := m.AddTransport("memberlist", tr); err != nil {
		t.Fatal(err)
	}
	tr.sent = 9
	rm := collect(t, r)
	if v, ok := point(rm, "gopherpace.transport.packets_sent", "transport", "memberlist"); !ok || v != 9 {
		t.Errorf("packets_sent %v (%v), want 9", v, ok)
	}
	if v, ok := point(rm, "gopherpace.transport.members", "transport", "memberlist"); !ok || v != 3 {
		t.Errorf("members %v (%v), want 3", v, ok)
	}
}

// Names are unique, nil is refused, and after Close nothing is observed
// or added.
func TestAddsAndClose(t *testing.T) {
	m, r := newMetrics(t)
	l := newLimiter(t)
	if err := m.Add("api", l); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"the same name twice": m.Add("api", newLimiter(t)),
		"no name":             m.Add("", l),
		"a nil limiter":       m.Add("x", nil),
		"a nil transport":     m.AddTransport("x", nil),
	} {
		if err == nil || !strings.HasPrefix(err.Error(), "otelpace: ") {
			t.Errorf("%s: %v, want an otelpace error", name, err)
		}
	}
	if _, err := otelpace.New(nil); err == nil {
		t.Error("a nil Meter was accepted")
	}
	if err := m.AddTransport("t", &fakeTransport{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	rm := collect(t, r)
	for _, name := range []string{"gopherpace.requests", "gopherpace.transport.members"} {
		if _, ok := point(rm, name); ok {
			t.Errorf("%s is still observed after Close", name)
		}
	}
	if err := m.Add("later", l); err == nil {
		t.Error("Add after Close was accepted")
	}
}

// Through the OpenTelemetry Prometheus exporter, scraped over HTTP, the
// instruments come out with prompace's names where the conventions allow
// (docs/operations.md lists both).
func TestPrometheusExporterScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	m, err := otelpace.New(provider.Meter("otelpace_test"))
	if err != nil {
		t.Fatal(err)
	}
	net := memtransport.New(memtransport.WithRealTime())
	tr, err := net.Join("a")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimiter(t, gopherpace.WithTransport(tr))
	if err := m.Add("api", l); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	for range 2 {
		l.AllowAt(at)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	for _, want := range []string{
		`gopherpace_requests_total\{[^}]*decision="allowed"[^}]*limiter="api"[^}]*\} 2`,
		`gopherpace_tokens_allowed_total\{[^}]*limiter="api"[^}]*\} 2`,
		`gopherpace_limit_period_seconds\{[^}]*limiter="api"[^}]*\} 1`,
		`gopherpace_limit_bucket_size\{[^}]*limiter="api"[^}]*\} 3`,
		`gopherpace_keys_live\{`,
		`gopherpace_cluster_peers\{[^}]*state="known"`,
		`gopherpace_cluster_hot_keys\{[^}]*limiter=`,
		`gopherpace_cluster_hot_keys_refused_total\{[^}]*limiter=`,
		`gopherpace_gossip_frames_relayed_total\{[^}]*outcome="dropped"`,
		`gopherpace_gossip_io_bytes_total\{[^}]*direction="sent"`,
		`gopherpace_gossip_frames_dropped_total\{[^}]*reason="malformed"`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// An in-flight limit's counters and what it and the cluster hold.
func TestObservesAnInFlightLimit(t *testing.T) {
	m, r := newMetrics(t)
	f, err := gopherpace.NewInFlight(2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := m.AddInFlight("payments", f); err != nil {
		t.Fatal(err)
	}
	if err := m.AddInFlight("payments", f); err == nil {
		t.Fatal("a second in-flight limit of one name was accepted")
	}
	release, _ := f.TryAcquire("")
	f.TryAcquire("")
	f.TryAcquire("")
	release()
	rm := collect(t, r)
	for _, want := range []struct {
		name  string
		attrs []string
		value float64
	}{
		{"gopherpace.inflight.requests", []string{"limiter", "payments", "decision", "acquired"}, 2},
		{"gopherpace.inflight.requests", []string{"limiter", "payments", "decision", "refused"}, 1},
		{"gopherpace.inflight.held", []string{"limiter", "payments", "scope", "node"}, 1},
		{"gopherpace.inflight.held", []string{"limiter", "payments", "scope", "cluster"}, 1},
		{"gopherpace.inflight.limit", []string{"limiter", "payments"}, 2},
		{"gopherpace.inflight.peers", []string{"limiter", "payments"}, 0},
	} {
		if v, ok := point(rm, want.name, want.attrs...); !ok || v != want.value {
			t.Errorf("%s%v = %v (found %v), want %v", want.name, want.attrs, v, ok, want.value)
		}
	}
}
