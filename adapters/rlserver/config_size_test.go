package rlserver

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// tenantsConfig is n tenants' limits in tiers (rates) tiers: the shape of
// a large config, one descriptor per tenant.
func tenantsConfig(n, tiers int) string {
	var b strings.Builder
	b.WriteString("domain: edge\ndescriptors:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - key: tenant\n    value: t%d\n    rate_limit: {unit: second, requests_per_unit: %d}\n", i, 10*(1+i%tiers))
	}
	return b.String()
}

// A config of 20,000 tenants in 7 tiers is 7 limiters, whatever the
// number of tenants; every tenant still has its own bucket at its own
// rate; /metrics has a few series per limiter, not per rule; and a reload
// to a small config closes the limiters no rule needs any more.
func TestALargeConfigIsAFewLimiters(t *testing.T) {
	f := newRLS(t, tenantsConfig(20_000, 7), false)
	set := f.svc.rules.Load()
	if len(set.cfg.rules) != 20_000 || len(set.limiters) != 7 {
		t.Fatalf("%d rules in %d limiters, want 20,000 in 7", len(set.cfg.rules), len(set.limiters))
	}
	for _, tenant := range []int{0, 1, 19_999} {
		rate := uint32(10 * (1 + tenant%7))
		d := &rlv3.RateLimitDescriptor{Entries: entries("tenant", fmt.Sprint("t", tenant))}
		st := f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", HitsAddend: rate, Descriptors: []*rlv3.RateLimitDescriptor{d}}).Statuses[0]
		if st.Code != rlspb.RateLimitResponse_OK || st.CurrentLimit.RequestsPerUnit != rate || st.LimitRemaining != 0 {
			t.Fatalf("tenant %d: %v, want its own bucket of %d spent whole", tenant, st, rate)
		}
		if st := f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{d}}).Statuses[0]; st.Code != rlspb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("tenant %d's bucket was not its own: %v", tenant, st)
		}
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(f.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if n := rec.Body.Len(); n > 100<<10 {
		t.Fatalf("/metrics is %d KB for 20,000 rules", n>>10)
	}
	old := set.limiters
	path := filepath.Join(t.TempDir(), "small.yaml")
	if err := os.WriteFile(path, []byte(tenantsConfig(3, 7)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.reload(path); err != nil {
		t.Fatal(err)
	}
	closed := 0
	for _, l := range old {
		if l.Stats().Closed {
			closed++
		}
	}
	if closed != 4 || len(f.svc.rules.Load().limiters) != 3 {
		t.Fatalf("after the reload to 3 tiers: %d of 7 limiters closed, %d left", closed, len(f.svc.rules.Load().limiters))
	}
}

// What a config may hold is bounded, with an error that says which bound
// and where: descriptors, distinct rates, bytes (the bounds lowered here,
// so that the test is quick). A file that is no config at all is not
// echoed into the error.
func TestConfigSizeIsBounded(t *testing.T) {
	defer func(b, d, r int) { maxConfigBytes, maxConfigDescriptors, maxRates = b, d, r }(maxConfigBytes, maxConfigDescriptors, maxRates)
	maxConfigBytes, maxConfigDescriptors, maxRates = 1<<20, 2000, 100
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var tooManyRates strings.Builder
	tooManyRates.WriteString("domain: edge\ndescriptors:\n")
	for i := range maxRates + 1 {
		fmt.Fprintf(&tooManyRates, "  - key: k\n    value: v%d\n    rate_limit: {unit: second, requests_per_unit: %d}\n", i, i+1)
	}
	huge := make([]byte, maxConfigBytes+1)
	for i := range huge {
		huge[i] = '#'
	}
	passwd := strings.Repeat("root:x:0:0:root:/root:/bin/bash daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin ", 20)
	for _, c := range []struct {
		name, text, says string
	}{
		{"descriptors.yaml", tenantsConfig(maxConfigDescriptors+1, 1), "more than 2000 descriptors"},
		{"rates.yaml", tooManyRates.String(), "more than 100 distinct rates"},
		{"huge.yaml", string(huge), "over 1024 KiB"},
		{"passwd.yaml", passwd, "expected a mapping"},
	} {
		_, err := loadRLSConfig(write(c.name, c.text), false)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.says)
			continue
		}
		if len(err.Error()) > 300 {
			t.Errorf("%s: an error of %d bytes: %.100s…", c.name, len(err.Error()), err)
		}
	}
	if _, err := loadRLSConfig(write("limit.yaml", tenantsConfig(maxConfigDescriptors, maxRates)), false); err != nil {
		t.Fatalf("a config at every bound is refused: %v", err)
	}
}

// With -rule-metrics each rule's outcomes are a series of their own;
// without it there are none.
func TestRuleMetrics(t *testing.T) {
	for _, on := range []bool{false, true} {
		f := newRLS(t, edgeConfig, false)
		if on {
			f.svc.byRule = true
			if err := f.metrics.reg.Register(ruleCollector{f.svc}); err != nil {
				t.Fatal(err)
			}
		}
		addr := &rlv3.RateLimitDescriptor{Entries: entries("remote_address", "10.9.9.9")}
		for range 21 {
			f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{addr}})
		}
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(f.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body := rec.Body.String()
		has := strings.Contains(body, `gopherpace_rls_rule_decisions_total{outcome="ok",rule="edge.remote_address"} 20`) &&
			strings.Contains(body, `gopherpace_rls_rule_decisions_total{outcome="over_limit",rule="edge.remote_address"} 1`)
		if has != on || !on && strings.Contains(body, "gopherpace_rls_rule_decisions_total") {
			t.Fatalf("-rule-metrics %v: the per-rule series are there: %v", on, has)
		}
	}
}

// BenchmarkLoadLargeConfig loads a config of 100,000 tenants in 7 tiers,
// as a reload does: its time, and the heap each rule holds afterwards
// (docs/service.md#the-config-file).
func BenchmarkLoadLargeConfig(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.yaml")
	if err := os.WriteFile(path, []byte(tenantsConfig(100_000, 7)), 0o600); err != nil {
		b.Fatal(err)
	}
	l, err := gopherpace.New(gopherpace.WithRefillRate(10))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	metrics, err := newServiceMetrics(l, nil)
	if err != nil {
		b.Fatal(err)
	}
	var perRule float64
	for b.Loop() {
		before := heapInUse()
		cfg, err := loadRLSConfig(path, false)
		if err != nil {
			b.Fatal(err)
		}
		svc, err := newRLSService(cfg, nil, gopherpace.DefaultMaxKeys, false, quiet, metrics)
		if err != nil {
			b.Fatal(err)
		}
		perRule = float64(heapInUse()-before) / 100_000
		svc.close()
	}
	b.ReportMetric(perRule, "B/rule")
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
