package deploy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/adapters/otelpace"
	"github.com/pedreviljoen/gopherpace/adapters/prompace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"gopkg.in/yaml.v3"
)

// scraped are the labels of every metric family an exporter writes.
type scraped map[string][]string

// exporters gathers both exporters' metrics for one clustered limiter
// that has decided, so that every family they can write is written.
func exporters(t *testing.T) map[string]scraped {
	net := memtransport.New(memtransport.WithRealTime())
	tr, err := net.Join("a")
	if err != nil {
		t.Fatal(err)
	}
	l, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithTransport(tr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	now := time.Now()
	for range 20 {
		l.AllowAt(now)
		l.TakeAt(now, "k", 1)
	}
	f, err := gopherpace.NewInFlight(2, gopherpace.WithTransport(tr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	for range 3 {
		f.TryAcquire("")
	}
	gather := func(reg *prometheus.Registry) scraped {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := scraped{}
		for _, f := range families {
			var labels []string
			for _, m := range f.GetMetric() {
				for _, lp := range m.GetLabel() {
					if !slices.Contains(labels, lp.GetName()) {
						labels = append(labels, lp.GetName())
					}
				}
			}
			out[f.GetName()] = labels
		}
		return out
	}
	prom := prometheus.NewRegistry()
	c := prompace.New()
	if err := c.Add("api", l); err != nil {
		t.Fatal(err)
	}
	if err := c.AddInFlight("payments", f); err != nil {
		t.Fatal(err)
	}
	prom.MustRegister(c)

	otelReg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(otelReg))
	if err != nil {
		t.Fatal(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	m, err := otelpace.New(provider.Meter("deploy_test"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Add("api", l); err != nil {
		t.Fatal(err)
	}
	if err := m.AddInFlight("payments", f); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return map[string]scraped{"prompace": gather(prom), "otelpace": gather(otelReg)}
}

var (
	metricName = regexp.MustCompile(`\bgopherpace_[a-z_]+\b`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)|label_values\([^,]+,\s*([a-zA-Z_]+)\)`)
)

// scrapeLabels are the labels Prometheus adds to every series it
// scrapes, which no exporter writes.
var scrapeLabels = []string{"instance", "job"}

// checkQuery checks that every gopherpace metric expr reads exists in each
// exporter's output, and that every label it matches or groups by is on
// one of those metrics.
func checkQuery(t *testing.T, where, expr string, out map[string]scraped) {
	t.Helper()
	names := metricName.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: %q reads no gopherpace metric", where, expr)
		return
	}
	var labels []string
	for _, m := range matcher.FindAllStringSubmatch(expr, -1) {
		labels = append(labels, m[1])
	}
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1]+","+g[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
	}
	for exp, families := range out {
		var have []string
		for _, n := range names {
			ls, ok := families[n]
			if !ok {
				t.Errorf("%s: %s is not in %s's output (%q)", where, n, exp, expr)
				continue
			}
			have = append(have, ls...)
		}
		for _, l := range labels {
			if !slices.Contains(have, l) && !slices.Contains(scrapeLabels, l) {
				t.Errorf("%s: label %q is on none of %v in %s's output (%q)", where, l, names, exp, expr)
			}
		}
	}
}

// Every query of the dashboard reads metrics and labels both exporters
// write.
func TestTheDashboardReadsWhatBothExportersWrite(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("grafana", "gopherpace.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string
		Templating struct {
			List []struct{ Name, Definition string }
		}
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	out := exporters(t)
	queries := 0
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			// Grafana's own variables are not PromQL.
			expr := strings.NewReplacer("$__rate_interval", "5m", "$limiter", "api").Replace(q.Expr)
			checkQuery(t, "panel "+p.Title, expr, out)
			queries++
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			checkQuery(t, "variable "+v.Name, v.Definition, out)
		}
	}
	if d.UID == "" || queries < 10 {
		t.Fatalf("uid %q, %d queries", d.UID, queries)
	}
}

type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert string
			Expr  string
		}
	}
}

// Every alert reads metrics and labels both exporters write, promtool
// accepts the rules, and each alert has a promtool test case, which
// passes.
func TestAlertRules(t *testing.T) {
	var rules ruleFile
	readYAML(t, filepath.Join("prometheus", "alerts.yaml"), &rules)
	out := exporters(t)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			checkQuery(t, "alert "+r.Alert, r.Expr, out)
			alerts = append(alerts, r.Alert)
		}
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				AlertName string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		}
	}
	readYAML(t, filepath.Join("prometheus", "alerts_test.yaml"), &tests)
	fired := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.AlertName] = true
			}
		}
	}
	for _, a := range alerts {
		if !fired[a] {
			t.Errorf("alert %s has no test case that fires it", a)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian's prometheus package; make test installs it): the rules' syntax and test cases are not run")
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
