package rlserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// A config written the way envoyproxy/ratelimit's documentation writes
// them: defaults per key, specific values that override them, a value with
// no limit (an allow list), nested levels, unlimited, names and replaces,
// wildcards.
const edgeConfig = `
domain: edge
descriptors:
  - key: tenant
    value: acme
    descriptors:
      - key: user                 # one bucket per user of acme
        rate_limit: {unit: second, requests_per_unit: 5}
      - key: user
        value: admin
        rate_limit: {unit: second, requests_per_unit: 50}
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: remote_address
    value: 10.0.0.1
    rate_limit: {unit: minute, requests_per_unit: 30}
  - key: remote_address
    value: 10.0.0.2             # trusted: no limit
  - key: plan
    value: free
    rate_limit:
      name: free_plan
      unit: day
      requests_per_unit: 1000
  - key: promo
    rate_limit:
      unit: hour
      requests_per_unit: 5000
      replaces: [{name: free_plan}]
  - key: health
    rate_limit: {unlimited: true}
  - key: path
    value: /api/*
    rate_limit: {unit: second, requests_per_unit: 7}
  - key: path
    value: /static/*
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 9}
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: yearly
    rate_limit: {unit: year, requests_per_unit: 365}
`

func entries(kv ...string) []*rlv3.RateLimitDescriptor_Entry {
	var out []*rlv3.RateLimitDescriptor_Entry
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

func TestConfigMatchesAsEnvoyRatelimitDoes(t *testing.T) {
	c, err := parseRLSConfig("edge.yaml", []byte(edgeConfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		domain string
		kv     []string
		rule   string // "" for no limit
	}{
		{"a key's default", "edge", []string{"remote_address", "10.9.9.9"}, "edge.remote_address"},
		{"a value's own limit wins", "edge", []string{"remote_address", "10.0.0.1"}, "edge.remote_address_10.0.0.1"},
		{"a value with no rate_limit is unlimited", "edge", []string{"remote_address", "10.0.0.2"}, ""},
		{"nested default", "edge", []string{"tenant", "acme", "user", "bob"}, "edge.tenant_acme.user"},
		{"nested value", "edge", []string{"tenant", "acme", "user", "admin"}, "edge.tenant_acme.user_admin"},
		{"a level without its own limit", "edge", []string{"tenant", "acme"}, ""},
		{"another tenant has no level", "edge", []string{"tenant", "other", "user", "bob"}, ""},
		{"more entries than the config has depths", "edge", []string{"remote_address", "1.2.3.4", "user", "x"}, ""},
		{"a wildcard", "edge", []string{"path", "/api/users"}, "edge.path_/api/*"},
		{"a wildcard's prefix alone", "edge", []string{"path", "/api/"}, "edge.path_/api/*"},
		{"no wildcard matches", "edge", []string{"path", "/other"}, ""},
		{"an unknown key", "edge", []string{"nope", "x"}, ""},
		{"an unknown domain", "other", []string{"remote_address", "10.9.9.9"}, ""},
		{"unlimited", "edge", []string{"health", "x"}, "edge.health"},
		{"requests_per_unit 0", "edge", []string{"blocked", "x"}, "edge.blocked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := c.match(tc.domain, entries(tc.kv...), nil)
			got := ""
			if r != nil {
				got = r.id
			}
			if got != tc.rule {
				t.Fatalf("matched %q, want %q", got, tc.rule)
			}
		})
	}
}

// Each distinct set of values has a bucket of its own, except values a
// share_threshold wildcard matched; and no two distinct descriptors share
// a key because of how their strings split.
func TestConfigBucketKeys(t *testing.T) {
	c, err := parseRLSConfig("edge.yaml", []byte(edgeConfig))
	if err != nil {
		t.Fatal(err)
	}
	key := func(kv ...string) string {
		_, k := c.match("edge", entries(kv...), nil)
		return string(k)
	}
	if key("remote_address", "1.1.1.1") == key("remote_address", "2.2.2.2") {
		t.Error("two addresses share a bucket")
	}
	if key("path", "/api/a") == key("path", "/api/b") {
		t.Error("a wildcard without share_threshold shares one bucket")
	}
	if key("path", "/static/a.css") != key("path", "/static/b.js") {
		t.Error("share_threshold values have buckets of their own")
	}
	if key("tenant", "acme", "user", "bob") == key("tenant", "acme", "user", "bo") {
		t.Error("distinct users share a bucket")
	}
	a, b := appendEntry(nil, "ab", "c", false), appendEntry(nil, "a", "bc", false)
	if string(a) == string(b) {
		t.Error("key and value boundaries are ambiguous")
	}
}

func TestConfigRates(t *testing.T) {
	c, err := parseRLSConfig("edge.yaml", []byte(edgeConfig))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][3]int64{
		"edge.remote_address":         {20, int64(time.Minute), 20},
		"edge.plan_free":              {1000, int64(24 * time.Hour), 1000},
		"edge.tenant_acme.user_admin": {50, int64(time.Second), 50},
		// A year is a token per its share of the year: a day for 365.
		"edge.yearly": {1, int64(24 * time.Hour), 365},
	} {
		r := c.rules[id]
		if r == nil {
			t.Fatalf("no rule %s", id)
		}
		tokens, per, size := r.rate()
		if got := [3]int64{tokens, int64(per), size}; got != want {
			t.Errorf("%s: rate %v, want %v", id, got, want)
		}
	}
	if r := c.rules["edge.plan_free"]; r.name != "free_plan" || r.unit != rlspb.RateLimitResponse_RateLimit_DAY {
		t.Errorf("plan_free: name %q unit %v", r.name, r.unit)
	}
	for id, perValue := range map[string]bool{
		"edge.remote_address": true, "edge.remote_address_10.0.0.1": false, "edge.tenant_acme.user": true,
		"edge.tenant_acme.user_admin": false, "edge.path_/api/*": true, "edge.path_/static/*": false,
	} {
		if c.rules[id].perValue != perValue {
			t.Errorf("%s: a bucket per value %v, want %v", id, !perValue, perValue)
		}
	}
	if r := c.rules["edge.promo"]; len(r.replaces) != 1 || r.replaces[0] != "free_plan" {
		t.Errorf("promo replaces %v", r.replaces)
	}
}

// The configurations envoyproxy/ratelimit refuses are refused here too,
// each naming the file and the line; and a few it takes silently that
// would never do what they say.
func TestConfigRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"not YAML", "domain: [", "edge.yaml"},
		{"empty file", "", "edge.yaml:1: empty file"},
		{"no domain", "descriptors: []", "edge.yaml:1: the domain is empty"},
		{"empty domain", "domain: \"\"\ndescriptors: []", "edge.yaml:1: the domain is empty"},
		{"unknown top-level key", "domain: d\ndescriptorz: []", `edge.yaml:2: unknown key "descriptorz"`},
		{"misspelled descriptor key", "domain: d\ndescriptors:\n  - key: a\n    rate_limt: {unit: second, requests_per_unit: 1}", `edge.yaml:4: unknown key "rate_limt"`},
		{"misspelled rate_limit key", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, request_per_unit: 1}", `unknown key "request_per_unit"`},
		{"misplaced key", "domain: d\ndescriptors:\n  - key: a\n    unit: second", `edge.yaml:4: unknown key "unit"`},
		{"a key that is not a string", "domain: d\ndescriptors:\n  - 1: a", "edge.yaml:3: a key must be a string"},
		{"a list of something other than mappings", "domain: d\ndescriptors:\n  - a", "expected a mapping"},
		{"empty descriptor key", "domain: d\ndescriptors:\n  - value: v", "edge.yaml:3: a descriptor needs a key"},
		{"duplicate descriptor", "domain: d\ndescriptors:\n  - key: a\n  - key: a", `edge.yaml:4: descriptor "d.a" is defined twice`},
		{"key_value collides with a key", "domain: d\ndescriptors:\n  - key: a_b\n  - key: a\n    value: b", `descriptor "d.a_b" is defined twice`},
		{"bad unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}", `edge.yaml:4: invalid rate limit unit "fortnight"`},
		{"no unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {requests_per_unit: 1}", `invalid rate limit unit ""`},
		{"unlimited with a unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, unit: second}", "an unlimited rate_limit takes no unit"},
		{"negative requests", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: -1}", "requests_per_unit must be a whole number"},
		{"requests too big", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 4294967296}", "requests_per_unit must be a whole number"},
		{"requests not a number", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: many}", "requests_per_unit must be a whole number"},
		{"empty replaces", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, name: n, replaces: [{name: \"\"}]}", "a replaces entry needs a name"},
		{"replaces itself", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, name: n, replaces: [{name: n}]}", `a limit cannot replace itself ("n")`},
		{"share_threshold without a wildcard", "domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true", "share_threshold needs a wildcard"},
		{"shadow_mode not a bool", "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: maybe", "shadow_mode must be true or false"},
		{"quota_mode not a bool", "domain: d\ndescriptors:\n  - key: a\n    quota_mode: often", "quota_mode must be true or false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRLSConfig("edge.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestConfigDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	write("b.yml", "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2}\n")
	write("notes.txt", "not a config")
	c, err := loadRLSConfig(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.rules["a.k"] == nil || c.rules["b.k"] == nil || len(c.rules) != 2 {
		t.Fatalf("rules %v", c.rules)
	}
	write("c.yaml", "domain: a\ndescriptors: []\n")
	if _, err := loadRLSConfig(dir, false); err == nil || !strings.Contains(err.Error(), `c.yaml:1: domain "a" is already defined`) {
		t.Fatalf("a domain in two files: %v", err)
	}
	if _, err := loadRLSConfig(t.TempDir(), false); err == nil || !strings.Contains(err.Error(), "no config files") {
		t.Fatalf("an empty directory: %v", err)
	}
}
