package rlserver

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// envoyproxy/ratelimit's Deployment, its variables as they are: each sets
// the flag of the same meaning, the Redis and statsd ones are named as
// ignored, and GOPHERPACE_* variables and flags still win.
func TestThePeersEnvironmentConfigures(t *testing.T) {
	env := map[string]string{
		"PORT": "8080", "GRPC_PORT": "8081", "GRPC_HOST": "0.0.0.0", "DEBUG_PORT": "6070",
		"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_WATCH_ROOT": "false",
		"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "LIMIT_REMAINING_HEADER": "X-RateLimit-Remaining",
		"SHADOW_MODE": "true", "QUOTA_MODE": "true", "MERGE_DOMAIN_CONFIG": "true",
		"LOG_LEVEL": "debug", "LOG_FORMAT": "json",
		"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379", "USE_STATSD": "false", "BACKEND_TYPE": "redis",
	}
	c, err := ParseFlags(nil, envOf(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]any{
		"addr": c.Addr == ":8080", "grpc addr": c.GRPCAddr == "0.0.0.0:8081",
		"config":  c.ConfigPath == filepath.Join("/data", "ratelimit", "config"),
		"headers": c.ResponseHeaders && c.HeaderNames == [3]string{"RateLimit-Limit", "X-RateLimit-Remaining", "RateLimit-Reset"},
		"shadow":  c.ShadowMode, "quota": c.QuotaMode, "merge": c.MergeDomains,
		"log": c.LogLevel == "debug" && c.LogFormat == "json",
	} {
		if got != true {
			t.Errorf("%s not taken from the peer's variables: %+v", name, c)
		}
	}
	slices.Sort(c.PeerEnvIgnored)
	if c.Statsd != "" {
		t.Errorf("USE_STATSD=false, and statsd is on: %q", c.Statsd)
	}
	if want := []string{"BACKEND_TYPE", "DEBUG_PORT", "REDIS_SOCKET_TYPE", "REDIS_URL", "RUNTIME_WATCH_ROOT"}; !slices.Equal(c.PeerEnvIgnored, want) {
		t.Errorf("ignored %v, want %v", c.PeerEnvIgnored, want)
	}
	// Ours win over the peer's, and flags over both.
	env["GOPHERPACE_ADDR"] = ":9000"
	c, err = ParseFlags([]string{"-shadow-mode=false", "-config", "/etc/limits.yaml"}, envOf(env), io.Discard)
	if err != nil || c.Addr != ":9000" || c.ShadowMode || c.ConfigPath != "/etc/limits.yaml" {
		t.Fatalf("precedence: %+v %v", c, err)
	}
	// statsd where the Deployment names one, at the peer's defaults for
	// the rest; tags with USE_DOG_STATSD.
	for env, want := range map[string]string{"STATSD_HOST=statsd": "statsd:8125", "STATSD_PORT=9125": "localhost:9125", "USE_STATSD=true": "localhost:8125", "": ""} {
		k, v, _ := strings.Cut(env, "=")
		c, err := ParseFlags(nil, envOf(map[string]string{k: v}), io.Discard)
		if err != nil || c.Statsd != want {
			t.Errorf("%s: statsd %q (%v), want %q", env, c.Statsd, err, want)
		}
	}
	c, _ = ParseFlags(nil, envOf(map[string]string{"STATSD_HOST": "s", "USE_DOG_STATSD": "true", "EXTRA_TAGS": "a:1,b:2", "STATS_FLUSH_INTERVAL": "5s"}), io.Discard)
	if !c.DogStatsd || !slices.Equal(c.StatsdTags, []string{"a:1", "b:2"}) || c.StatsFlush != 5*time.Second {
		t.Errorf("dogstatsd %v, tags %v, flush %v", c.DogStatsd, c.StatsdTags, c.StatsFlush)
	}
	// The peer's own default app directory, and bad values named.
	c, _ = ParseFlags(nil, envOf(map[string]string{"RUNTIME_ROOT": "/srv/runtime_data/current"}), io.Discard)
	if c.ConfigPath != filepath.Join("/srv/runtime_data/current", "config") {
		t.Fatalf("RUNTIME_ROOT alone: config %q", c.ConfigPath)
	}
	for k, v := range map[string]string{"LOG_LEVEL": "loud", "LOG_FORMAT": "xml", "SHADOW_MODE": "maybe", "LIMIT_RESET_HEADER": "bad header"} {
		if _, err := ParseFlags(nil, envOf(map[string]string{k: v}), io.Discard); err == nil {
			t.Errorf("%s=%q was taken", k, v)
		}
	}
}

// A runtime directory as Kubernetes mounts a ConfigMap (every file twice,
// under "..data" and a dated directory, the visible names links into
// them) and with subdirectories: every file is read once, at any depth,
// with or without an extension; dot files never.
func TestARuntimeDirectoryLoadsRecursively(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	dated := filepath.Join(dir, "..2026_12_05_08_00_00.1")
	for _, d := range []string{dated, filepath.Join(dir, "team")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dated, "edge.yaml"), "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	for _, link := range [][2]string{{"..2026_12_05_08_00_00.1", "..data"}, {"..data/edge.yaml", "edge.yaml"}} {
		if err := os.Symlink(link[0], filepath.Join(dir, link[1])); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "team", "api"), "domain: api\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n")
	write(filepath.Join(dir, ".hidden.yaml"), "domain: edge\n")
	write(filepath.Join(dir, "README.md"), "# not a config")
	c, err := ParseFlags(nil, envOf(map[string]string{"RUNTIME_ROOT": root, "RUNTIME_SUBDIRECTORY": "ratelimit"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loadRLSConfig(c.ConfigPath, false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.rules["edge.k"] == nil || cfg.rules["api.k"] == nil || len(cfg.domains) != 2 {
		t.Fatalf("domains %d, rules %v", len(cfg.domains), cfg.rules)
	}
	before := fingerprint(c.ConfigPath)
	write(filepath.Join(dir, "team", "api"), "domain: api\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 6}\n")
	if fingerprint(c.ConfigPath) == before {
		t.Fatal("a change in a subdirectory's file leaves the fingerprint the same: it would not reload")
	}
}

// With -merge-domains a domain's descriptors may come from several files;
// one descriptor in two of them is still an error.
func TestMergeDomains(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	write("b.yaml", "domain: edge\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 2}\n")
	if _, err := loadRLSConfig(dir, false); err == nil || !strings.Contains(err.Error(), "-merge-domains") {
		t.Fatalf("a domain in two files without merging: %v", err)
	}
	c, err := loadRLSConfig(dir, true)
	if err != nil || c.rules["edge.a"] == nil || c.rules["edge.b"] == nil || len(c.domains) != 1 {
		t.Fatalf("merged: %v %v", c, err)
	}
	if r, _ := c.match("edge", entries("b", "x"), nil); r == nil || r.requestsPerUnit != 2 {
		t.Fatalf("the second file's descriptor does not match: %v", r)
	}
	write("c.yaml", "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 3}\n")
	if _, err := loadRLSConfig(dir, true); err == nil || !strings.Contains(err.Error(), "defined in two files") {
		t.Fatalf("one descriptor in two files: %v", err)
	}
}

// -shadow-mode answers OK what is over the limit, keeping each
// descriptor's status and counting it.
func TestGlobalShadowMode(t *testing.T) {
	f := newRLS(t, edgeConfig, false)
	f.svc.shadowAll = true
	d := descriptor("remote_address", "10.7.7.7")
	d.HitsAddend = nil
	for range 20 {
		f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{d}})
	}
	resp := f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{d}})
	if resp.OverallCode != rlspb.RateLimitResponse_OK || resp.Statuses[0].Code != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("over the limit in shadow mode: %v", resp)
	}
	if got := testutil.ToFloat64(f.metrics.requests.WithLabelValues(outcomeShadowDenied)); got != 1 {
		t.Fatalf("%v calls counted shadow_denied, want 1", got)
	}
}

// The -response-headers fields take the names configured, as
// envoyproxy/ratelimit's LIMIT_*_HEADER variables set them.
func TestResponseHeaderNames(t *testing.T) {
	f := newRLS(t, edgeConfig, true)
	f.svc.headerNames = [3]string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
	resp := f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("remote_address", "10.6.6.6")}})
	var names []string
	for _, h := range resp.ResponseHeadersToAdd {
		names = append(names, h.Key)
	}
	if !slices.Equal(names, f.svc.headerNames[:]) {
		t.Fatalf("header names %v, want %v", names, f.svc.headerNames)
	}
}

// envoyproxy/ratelimit's HTTP endpoints: POST /json answers a
// RateLimitRequest in JSON (429 over the limit, 400 for what does not
// parse) and GET /healthcheck is the readiness probe.
func TestPeersHTTPEndpoints(t *testing.T) {
	f := newRLS(t, edgeConfig, false)
	l, err := gopherpace.New(gopherpace.WithRefillRate(10))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := httptest.NewServer(handler(l, nil, nil, f.svc, nil))
	defer srv.Close()
	post := func(body string) (int, string) {
		resp, err := http.Post(srv.URL+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	req := `{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.8.8.8"}]}],"hitsAddend":20}`
	if code, body := post(req); code != http.StatusOK || !strings.Contains(body, `"overallCode":"OK"`) {
		t.Fatalf("/json within the limit: %d %s", code, body)
	}
	if code, body := post(req); code != http.StatusTooManyRequests || !strings.Contains(body, `"overallCode":"OVER_LIMIT"`) {
		t.Fatalf("/json over the limit: %d %s", code, body)
	}
	for _, bad := range []string{`{"domain":`, `{"domain":"edge"}`, string(bytes.Repeat([]byte("x"), maxJSONRequest+2))} {
		if code, _ := post(bad); code != http.StatusBadRequest {
			t.Errorf("/json %.20q: %d, want 400", bad, code)
		}
	}
	resp, err := http.Get(srv.URL + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "OK" {
		t.Fatalf("/healthcheck: %d %q", resp.StatusCode, b)
	}
}

// -zone (GOPHERPACE_ZONE) names this replica's zone for the transport.
func TestZoneFlag(t *testing.T) {
	c, err := ParseFlags(nil, envOf(map[string]string{"GOPHERPACE_ZONE": "eu-west-1a"}), io.Discard)
	if err != nil || c.Zone != "eu-west-1a" {
		t.Fatalf("zone %q, %v", c.Zone, err)
	}
	if _, err := ParseFlags([]string{"-zone", strings.Repeat("z", 256)}, envOf(nil), io.Discard); err == nil {
		t.Fatal("a zone of 256 bytes was taken")
	}
}

// The HTTP API's limits from a file: its rate and burst unless the flags
// say, its keys beside -limits'.
func TestAllowConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "allow.yaml")
	if err := os.WriteFile(path, []byte("rate: 30/m\nburst: 20\nkeys:\n  tenant-a: {rate: 100/m, burst: 50}\n  tenant-b: {rate: 5000/h}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ParseFlags([]string{"-allow-config", path, "-limits", "tenant-c=1:1"}, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rate != (Rate{30, time.Minute}) || c.Burst != 20 || c.Limits["tenant-a"] != (Limit{Rate{100, time.Minute}, 50}) ||
		c.Limits["tenant-b"] != (Limit{Rate{5000, time.Hour}, 5000}) || c.Limits["tenant-c"].Burst != 1 {
		t.Fatalf("%+v", c)
	}
	c, err = ParseFlags([]string{"-allow-config", path, "-rate", "7"}, envOf(nil), io.Discard)
	if err != nil || c.Rate != (Rate{7, time.Second}) || c.Burst != 20 {
		t.Fatalf("-rate over the file: %+v %v", c.Rate, err)
	}
	for name, text := range map[string]string{
		"an unknown field": "rat: 10\n", "a bad rate": "rate: fast\n", "a key's bad rate": "keys: {a: {rate: 0}}\n", "a negative burst": "burst: -1\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseFlags([]string{"-allow-config", path}, envOf(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "-allow-config") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := os.WriteFile(path, []byte("keys: {tenant-c: {rate: 1}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFlags([]string{"-allow-config", path, "-limits", "tenant-c=1:1"}, envOf(nil), io.Discard); err == nil {
		t.Error("a key in both -limits and the file was taken")
	}
}
