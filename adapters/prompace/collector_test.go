package prompace

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type fakeTransport struct{}

func (fakeTransport) Metrics() (map[string]uint64, map[string]uint64) {
	return map[string]uint64{"datagrams_sent": 42, "send_errors": 1}, map[string]uint64{"members": 3}
}

// A real registry, scraped over HTTP: the exposition text has the metrics,
// their HELP and TYPE, and the counts of what the limiters decided.
func TestScrape(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	net := memtransport.New(memtransport.WithRandom(2))
	var lims []*gopherpace.Limiter
	for _, name := range []string{"a", "b"} {
		tr, err := net.Join(name)
		if err != nil {
			t.Fatal(err)
		}
		l, err := gopherpace.New(gopherpace.WithRate(3, time.Second), gopherpace.WithTransport(tr), gopherpace.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lims = append(lims, l)
	}
	standalone, _ := gopherpace.New(gopherpace.WithRate(1, time.Minute), gopherpace.WithShadowMode(), gopherpace.WithLogger(quiet))
	defer standalone.Close()
	net.Advance(time.Second)
	for range 5 {
		lims[0].AllowAt(net.Now())
		net.Advance(10 * time.Millisecond)
	}
	standalone.Allow()
	standalone.Allow() // shadowed

	c := New()
	if err := c.Add("api", lims[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.Add("login", standalone); err != nil {
		t.Fatal(err)
	}
	if err := c.Add("api", lims[1]); err == nil {
		t.Fatal("a second limiter named api was accepted")
	}
	if err := c.AddTransport("memberlist", fakeTransport{}); err != nil {
		t.Fatal(err)
	}
	if c.Add("", lims[1]) == nil || c.Add("other", nil) == nil || c.AddTransport("udp", nil) == nil || c.AddTransport("memberlist", fakeTransport{}) == nil {
		t.Fatal("an empty name, a nil limiter or transport, or a repeated transport name was accepted")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		"# HELP gopherpace_requests_total Requests decided, by decision",
		"# TYPE gopherpace_requests_total counter",
		`gopherpace_requests_total{decision="allowed",limiter="api"} 3`,
		`gopherpace_requests_total{decision="denied",limiter="api"} 2`,
		`gopherpace_requests_total{decision="allowed",limiter="login"} 1`,
		`gopherpace_requests_total{decision="shadowed",limiter="login"} 1`,
		`gopherpace_cluster_peers{limiter="api",state="known"} 2`,
		`gopherpace_cluster_partitioned{limiter="api"} 0`,
		`gopherpace_cluster_hot_keys{limiter="api"} 0`,
		`gopherpace_cluster_hot_keys_refused_total{limiter="api"} 0`,
		`gopherpace_gossip_frames_relayed_total{limiter="api",outcome="relayed"} 0`,
		`gopherpace_gossip_frames_relayed_total{limiter="api",outcome="dropped"} 0`,
		`gopherpace_gossip_bytes_total{direction="sent",limiter="api"}`,
		`gopherpace_clustered{limiter="login"} 0`,
		`gopherpace_limit_tokens{limiter="login"} 1`,
		`gopherpace_limit_period_seconds{limiter="login"} 60`,
		`gopherpace_limit_bucket_size_tokens{limiter="api"} 3`,
		`gopherpace_transport_datagrams_sent_total{transport="memberlist"} 42`,
		`gopherpace_transport_members{transport="memberlist"} 3`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the scrape lacks %q", want)
		}
	}
	if strings.Contains(text, `gopherpace_cluster_peers{limiter="login"`) {
		t.Error("a standalone limiter exported cluster metrics")
	}
	if t.Failed() {
		t.Log(text)
	}
}

// Two collectors that export a limiter of the same name are refused at
// Register, not at every scrape; distinct names register side by side.
// With WithTopKeys the tokens of the heaviest keys are exported by rank,
// never by key: a fixed few series whatever the keys.
func TestScrapeTopKeysByRank(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRate(3, time.Second), gopherpace.WithTopKeys(true))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	at := time.Now()
	for i := range 8 {
		for range 4 + i*10 {
			l.TakeAt(at, "tenant-"+strconv.Itoa(i), 1)
		}
	}
	c := New()
	if err := c.Add("api", l); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "gopherpace_top_keys_tokens" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if strings.Contains(strings.Join([]string{labels["limiter"], labels["list"], labels["rank"]}, " "), "tenant") {
				t.Fatalf("a key in a label: %v", labels)
			}
			got[labels["list"]+" "+labels["rank"]] = m.GetGauge().GetValue()
		}
	}
	// tenant-7 sent 74 and was admitted 3: 71 denied; tenant-6 61...
	for rank, want := range []float64{71, 61, 51, 41, 31} {
		if v := got["denied "+strconv.Itoa(rank+1)]; v != want {
			t.Errorf("denied rank %d: %v, want %v (all: %v)", rank+1, v, want, got)
		}
	}
	if _, ok := got["denied 6"]; ok {
		t.Error("a sixth rank is exported")
	}
}

func TestRegisterRefusesADuplicateName(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRefillRate(1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reg := prometheus.NewRegistry()
	first, same, other := New(), New(), New()
	for _, c := range []*Collector{first, same} {
		if err := c.Add("api", l); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.Add("login", l); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(first); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(same); err == nil {
		t.Fatal("a second collector with limiter \"api\" was registered")
	}
	if err := reg.Register(other); err != nil {
		t.Fatalf("a collector with another name: %v", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("the scrape fails: %v", err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "gopherpace_collector_") {
			t.Fatal("the names' descriptions are collected")
		}
	}
}

// Two nodes' in-flight limits over a simulated network, scraped over
// HTTP: the counts of what each decided, what it and the cluster hold,
// and what it sent.
func TestScrapeInFlight(t *testing.T) {
	net := memtransport.New(memtransport.WithRandom(3))
	var fs []*gopherpace.InFlight
	for _, name := range []string{"a", "b"} {
		tr, err := net.Join(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := gopherpace.NewInFlight(3, gopherpace.WithTransport(tr))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fs = append(fs, f)
	}
	// b takes two slots (a new key's requests go one report at a time),
	// then a takes the third, and is refused a fourth.
	for range 4 {
		fs[1].TryAcquire("")
		net.Advance(5 * time.Millisecond)
	}
	for range 2 {
		fs[0].TryAcquire("")
		net.Advance(5 * time.Millisecond)
	}
	net.Advance(100 * time.Millisecond)
	c := New()
	if err := c.AddInFlight("payments", fs[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.AddInFlight("payments", fs[1]); err == nil {
		t.Fatal("a second in-flight limit of one name was accepted")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	for _, want := range []string{
		`gopherpace_inflight_requests_total{decision="refused",limiter="payments"} 1`,
		`gopherpace_inflight_requests_total{decision="acquired",limiter="payments"} 1`,
		`gopherpace_inflight_held{limiter="payments",scope="node"} 1`,
		`gopherpace_inflight_held{limiter="payments",scope="cluster"} 3`,
		`gopherpace_inflight_limit{limiter="payments"} 3`,
		`gopherpace_inflight_peers{limiter="payments"} 1`,
		"# TYPE gopherpace_inflight_frames_total counter",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(text, `gopherpace_inflight_frames_total{direction="sent",limiter="payments"} 0`) {
		t.Error("no gauge frame counted as sent")
	}
}
