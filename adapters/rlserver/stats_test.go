package rlserver

import (
	"strings"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
)

const statsConfig = `
domain: st
descriptors:
  - key: route
    value: draw
    descriptors:
      - key: http_method
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: tenant
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: path
    value: /login
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: shady
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
`

// With -rule-metrics, hits are counted as envoyproxy/ratelimit counts
// them, under its keys: the rule's path, or with detailed_metric every
// value of the request, or with value_to_metric the value at that depth.
func TestStatsUnderThePeersKeys(t *testing.T) {
	f := newRLS(t, statsConfig, false)
	f.svc.byRule = true
	reg := prometheus.NewRegistry()
	reg.MustRegister(ruleCollector{f.svc})
	ask := func(domain string, hits uint32, kv ...string) {
		f.ask(t, &rlspb.RateLimitRequest{Domain: domain, HitsAddend: hits, Descriptors: []*rlv3.RateLimitDescriptor{descriptor(kv...)}})
	}
	for range 3 {
		ask("st", 1, "path", "/login") // 2 within (the second near), then 1 over
	}
	ask("st", 2, "route", "draw", "http_method", "GET")
	ask("st", 1, "tenant", "acme")
	ask("st", 1, "shady", "x")
	ask("st", 1, "shady", "x") // over, in shadow
	ask("st", 4, "free", "y")
	ask("nowhere", 1, "a", "b")
	for series, want := range map[string]float64{
		`{key="st.path_/login",stat="total_hits"}`:                  3,
		`{key="st.path_/login",stat="within_limit"}`:                2,
		`{key="st.path_/login",stat="near_limit"}`:                  1,
		`{key="st.path_/login",stat="over_limit"}`:                  1,
		`{key="st.route_draw.http_method_GET",stat="total_hits"}`:   2,
		`{key="st.route_draw.http_method_GET",stat="within_limit"}`: 2,
		`{key="st.tenant_acme",stat="total_hits"}`:                  1,
		`{key="st.shady",stat="shadow_mode"}`:                       1,
		`{key="st.shady",stat="within_limit"}`:                      1,
		`{key="st.free",stat="total_hits"}`:                         4,
		`{key="st.free",stat="within_limit"}`:                       0,
	} {
		if got := gathered(t, reg, "gopherpace_rls_hits_total", series); got != want {
			t.Errorf("gopherpace_rls_hits_total%s = %v, want %v", series, got, want)
		}
	}
	if got := gathered(t, reg, "gopherpace_rls_domain_not_found_total", `{domain="nowhere"}`); got != 1 {
		t.Errorf("domain_not_found = %v", got)
	}
	// The keys built from values are bounded.
	for i := range maxStatKeys + 5 {
		f.svc.stats.hit(f.svc.rules.Load().cfg, "st", entries("tenant", strings.Repeat("x", 3)+string(rune('a'+i%26))+strings.Repeat("y", i/26)),
			&checked{rule: f.svc.rules.Load().cfg.rules["st.tenant"], hits: 1})
	}
	if n := len(f.svc.stats.keys); n != maxStatKeys {
		t.Errorf("%d keys held, want the cap, %d", n, maxStatKeys)
	}
	if got := gathered(t, reg, "gopherpace_rls_stats_dropped_total", "{}"); got < 5 {
		t.Errorf("%v hits dropped past the cap, want at least 5", got)
	}
}

// gathered is the value of one series of a family in reg.
func gathered(t *testing.T, reg *prometheus.Registry, family, labels string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			var parts []string
			for _, l := range m.GetLabel() {
				parts = append(parts, l.GetName()+`="`+l.GetValue()+`"`)
			}
			if "{"+strings.Join(parts, ",")+"}" == labels {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}
