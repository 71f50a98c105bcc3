package main

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The behaviours envoyproxy/ratelimit's integration scripts check, run
// against the built binary started by that project's own environment
// variables (its integration Deployment's, Redis gone). The fixture is our
// own: it has the features of the peer's example config (nested keys,
// values with limits of their own, replaces, a 0 limit, shadow mode,
// unlimited, detailed_metric, quota_mode with metadata) under other names,
// and each request below is the one Envoy sends for one of the scripts'
// curl calls (a descriptor per rate_limits entry whose headers are all
// present). docs/service.md lists where we differ on purpose.
const peerCasesConfig = `
domain: shop
descriptors:
  - key: tier                       # a limit that replaces two others
    value: partner
    rate_limit:
      replaces: [{name: vip}, {name: trial}]
      unit: minute
      requests_per_unit: 4
  - key: from
    value: gateway
    descriptors:
      - key: to
        value: vip-svc
        rate_limit: {replaces: [{name: vip}], unit: minute, requests_per_unit: 2}
      - key: to
        value: mock
        rate_limit: {unit: minute, requests_per_unit: 1}
      - key: to
        value: exempt
        rate_limit: {replaces: [{name: blocked}], unit: minute, requests_per_unit: 2}
      - key: to
        value: trial-svc
        rate_limit: {name: trial, unit: minute, requests_per_unit: 2}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2}
    descriptors:
      - key: plan
        rate_limit: {unit: minute, requests_per_unit: 3}
      - key: plan
        value: vip
        rate_limit: {name: vip, unit: minute, requests_per_unit: 1}
      - key: plan
        value: banned
        rate_limit: {name: blocked, unit: minute, requests_per_unit: 0}
      - key: region
        rate_limit: {unit: second, requests_per_unit: 1}
      - key: region
        value: eu
        rate_limit: {unit: minute, requests_per_unit: 3}
      - key: region
        value: test
        shadow_mode: true
        rate_limit: {unit: minute, requests_per_unit: 3}
      - key: device
        rate_limit: {unlimited: true}
  - key: detail
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: free
    rate_limit: {unlimited: true}
  - key: svc
    value: a
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata:
      routing: {name: a}
  - key: svc
    value: b
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
    metadata:
      routing: {name: b}
`

// headers are a curl call's headers, by the fixture's key names.
type headers map[string]string

// route builds the descriptors Envoy sends for a route's rate_limits: one
// per action list whose headers are all present.
func route(actions ...[]string) func(headers) []*rlv3.RateLimitDescriptor {
	return func(h headers) []*rlv3.RateLimitDescriptor {
		var out []*rlv3.RateLimitDescriptor
	next:
		for _, keys := range actions {
			d := &rlv3.RateLimitDescriptor{}
			for _, k := range keys {
				v, ok := h[k]
				if !ok {
					continue next
				}
				d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: k, Value: v})
			}
			out = append(out, d)
		}
		return out
	}
}

var (
	twoHeaders  = route([]string{"user", "plan"}, []string{"user", "region"})
	fourHeaders = route([]string{"user", "plan"}, []string{"from", "to"})
	fiveHeaders = route([]string{"user", "plan"}, []string{"from", "to"}, []string{"tier"})
	oneHeader   = route([]string{"detail"})
)

// runtimeRoot lays files (paths under the config directory) out as the
// peer's Deployment mounts them, RUNTIME_ROOT/ratelimit/config/..., and
// returns the environment that points the server at them.
func runtimeRoot(t *testing.T, files map[string]string) []string {
	t.Helper()
	root := t.TempDir()
	for name, text := range files {
		path := filepath.Join(root, "ratelimit", "config", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, text)
	}
	return []string{"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "USE_STATSD=false"}
}

// peerServer starts the built binary as the peer's integration Deployment
// configures it, on the fixture.
func peerServer(t *testing.T) (*proc, rlspb.RateLimitServiceClient) {
	env := append(runtimeRoot(t, map[string]string{"shop.yaml": peerCasesConfig}),
		"LOG_LEVEL=debug", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=redis:6379", "RUNTIME_WATCH_ROOT=false", "RESPONSE_DYNAMIC_METADATA=true")
	p := startWith(t, build(t), env, "-addr", "127.0.0.1:0", "-rule-metrics")
	return p, rlspb.NewRateLimitServiceClient(dial(t, p.grpc))
}

// ask sends ds, each with hits as its own hits_addend (as Envoy sets a
// route's hits_addend: 0 included, which the request's field cannot
// carry).
func ask(t *testing.T, c rlspb.RateLimitServiceClient, hits uint64, ds []*rlv3.RateLimitDescriptor) *rlspb.RateLimitResponse {
	t.Helper()
	for _, d := range ds {
		d.HitsAddend = wrapperspb.UInt64(hits)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "shop", Descriptors: ds})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Each step is a curl call of a script and what the script expects of it:
// passed on (true) or answered 429.
type peerStep struct {
	build func(headers) []*rlv3.RateLimitDescriptor
	h     headers
	ok    bool
}

func runSteps(t *testing.T, c rlspb.RateLimitServiceClient, steps []peerStep) {
	t.Helper()
	for i, s := range steps {
		resp := ask(t, c, 1, s.build(s.h))
		if got := resp.OverallCode == rlspb.RateLimitResponse_OK; got != s.ok {
			t.Fatalf("call %d %v: %v, want passed=%v (statuses %v)", i+1, s.h, resp.OverallCode, s.ok, resp.Statuses)
		}
	}
}

func TestThePeersIntegrationScripts(t *testing.T) {
	t.Parallel() // each starts servers of its own, on ports the OS picks
	p, c := peerServer(t)

	// simple-get: a shadowed limit lets a first request through.
	t.Run("simple get", func(t *testing.T) {
		runSteps(t, c, []peerStep{{twoHeaders, headers{"user": "test", "region": "test"}, true}})
	})

	// trigger-ratelimit: a value's own limit of 3 a minute passes three
	// calls and answers 429 to the next two.
	t.Run("trigger a limit", func(t *testing.T) {
		h := headers{"user": "pelle", "region": "eu"}
		runSteps(t, c, []peerStep{{twoHeaders, h, true}, {twoHeaders, h, true}, {twoHeaders, h, true}, {twoHeaders, h, false}, {twoHeaders, h, false}})
	})

	// trigger-shadow-mode-key: a shadow_mode limit of 3 a minute answers
	// OK to every call, and says what is left (nothing) on those over it.
	t.Run("shadow mode key", func(t *testing.T) {
		h := headers{"user": "pelle", "region": "test"}
		for i := range 6 {
			resp := ask(t, c, 1, twoHeaders(h))
			if resp.OverallCode != rlspb.RateLimitResponse_OK {
				t.Fatalf("call %d of a shadow key: %v, want OK", i+1, resp.OverallCode)
			}
			if i >= 3 && resp.Statuses[0].LimitRemaining != 0 {
				t.Fatalf("call %d, over the shadowed limit: %d remaining, want 0", i+1, resp.Statuses[0].LimitRemaining)
			}
		}
	})

	// replaces: a limit named in a matched limit's replaces is not
	// applied (and not spent) in that request; a limit of 0 denies.
	t.Run("replaces", func(t *testing.T) {
		banned := headers{"user": "u1", "plan": "banned"}
		exempt := headers{"user": "u1", "plan": "banned", "from": "gateway", "to": "exempt"}
		vipSvc := headers{"user": "u2", "plan": "vip", "from": "gateway", "to": "vip-svc"}
		other := headers{"user": "u2", "plan": "vip", "from": "gateway", "to": "other"}
		partner := headers{"user": "u2", "plan": "vip", "from": "gateway", "to": "trial-svc", "tier": "partner"}
		vip3 := headers{"user": "u3", "plan": "vip"}
		trial := headers{"user": "u4", "plan": "p3", "from": "gateway", "to": "trial-svc"}
		runSteps(t, c, []peerStep{
			{twoHeaders, banned, false}, // a limit of 0
			{fourHeaders, headers{"user": "u1", "plan": "banned", "from": "gateway", "to": "mock"}, false},
			{fourHeaders, exempt, true}, // exempt replaces the 0 limit
			{fourHeaders, exempt, true},
			{fourHeaders, exempt, false}, // exempt's own 2 a minute
			{fourHeaders, vipSvc, true},  // vip-svc replaces vip's 1 a minute
			{fourHeaders, vipSvc, true},
			{fourHeaders, vipSvc, false}, // vip-svc's own 2
			{fourHeaders, other, true},   // no limit for "other": vip's 1 applies
			{fourHeaders, other, false},
			{fourHeaders, vipSvc, false},
			{fiveHeaders, partner, true}, // partner replaces vip and trial: its 4
			{fiveHeaders, partner, true},
			{fiveHeaders, partner, true},
			{fiveHeaders, partner, true},
			{fiveHeaders, partner, false},
			{twoHeaders, vip3, true}, // another user's vip bucket
			{twoHeaders, vip3, false},
			{fourHeaders, trial, true}, // trial's 2, never spent while replaced
			{fourHeaders, trial, true},
			{fourHeaders, trial, false},
			{fiveHeaders, partner, false},
		})
	})

	// value-included-in-stats-key-when-unspecified: detailed_metric puts
	// the request's value in the stats key.
	t.Run("value in the stats key", func(t *testing.T) {
		h := headers{"detail": "unspecified_value"}
		runSteps(t, c, []peerStep{{oneHeader, h, true}, {oneHeader, h, true}, {oneHeader, h, false}})
		_, metrics := get(t, "http://"+p.http+"/metrics")
		want := regexp.MustCompile(`gopherpace_rls_hits_total\{key="shop\.detail_unspecified_value",stat="over_limit"\} 1\n`)
		if !want.MatchString(metrics) {
			t.Fatalf("no over_limit of 1 under the value's stats key:\n%s", grepLines(metrics, "gopherpace_rls_hits_total"))
		}
	})

	quota := []*rlv3.RateLimitDescriptor{svc("a"), svc("b")}

	// quota: a request under two quota_mode limits is denied only when
	// both are spent: a (1 a minute) is over on the second call, b (2 a
	// minute) on the third.
	t.Run("quota mode", func(t *testing.T) {
		for i, want := range []rlspb.RateLimitResponse_Code{rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OVER_LIMIT} {
			if got := ask(t, c, 1, quota).OverallCode; got != want {
				t.Fatalf("call %d: %v, want %v", i+1, got, want)
			}
		}
	})
}

// The token quota scripts, each on a server of its own (they spend the
// fixture's quota rules).
func TestThePeersTokenQuotaScripts(t *testing.T) {
	t.Parallel() // each starts servers of its own, on ports the OS picks
	// token-quota: each request is checked with 0 hits and its usage (1)
	// reported after the response. A budget of 2 passes three requests
	// (the third is checked while the budget is spent, not overdrawn) and
	// answers 429 to the fourth.
	t.Run("token quota", func(t *testing.T) {
		t.Parallel()
		_, c := peerServer(t)
		for i, want := range []bool{true, true, true, false} {
			check := ask(t, c, 0, []*rlv3.RateLimitDescriptor{svc("b")})
			if got := check.OverallCode == rlspb.RateLimitResponse_OK; got != want {
				t.Fatalf("request %d: checked %v, want passed=%v", i+1, check.OverallCode, want)
			}
			if want {
				ask(t, c, 1, []*rlv3.RateLimitDescriptor{svc("b")}) // the usage, after the response
			}
		}
	})

	// multiservice-tokenquota: both services' budgets are checked with 0
	// hits; the response's dynamic metadata names the service to route to
	// (the first budget that passed), and the usage is reported against
	// the service that answered. a (1) serves two requests, b (2) the next
	// three, and the sixth is answered 429.
	t.Run("multiservice token quota", func(t *testing.T) {
		t.Parallel()
		_, c := peerServer(t)
		both := []*rlv3.RateLimitDescriptor{svc("a"), svc("b")}
		for i, want := range []string{"a", "a", "b", "b", "b", ""} {
			check := ask(t, c, 0, both)
			if want == "" {
				if check.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT {
					t.Fatalf("request %d: %v, want OVER_LIMIT", i+1, check.OverallCode)
				}
				continue
			}
			if check.OverallCode != rlspb.RateLimitResponse_OK {
				t.Fatalf("request %d: %v, want OK", i+1, check.OverallCode)
			}
			got := routedTo(check.DynamicMetadata)
			if got != want {
				t.Fatalf("request %d routed to %q (metadata %v), want %q", i+1, got, check.DynamicMetadata, want)
			}
			ask(t, c, 1, []*rlv3.RateLimitDescriptor{svc(got)})
		}
	})
}

func svc(name string) *rlv3.RateLimitDescriptor {
	return &rlv3.RateLimitDescriptor{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "svc", Value: name}}}
}

// routedTo is the service Envoy's header_to_metadata would route to:
// metadata.routing.name in the response's dynamic metadata.
func routedTo(md *structpb.Struct) string {
	m := md.GetFields()["metadata"].GetStructValue()
	return m.GetFields()["routing"].GetStructValue().GetFields()["name"].GetStringValue()
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The configs envoyproxy/ratelimit's config tests refuse, in our own
// words, each the only file of the peer's runtime directory: the built
// binary refuses to start on each, exits 1 and names the file and the
// fault. Two files of one domain are refused unless MERGE_DOMAIN_CONFIG,
// which merges them and still refuses a key defined twice.
func TestThePeersBadConfigsAreRefused(t *testing.T) {
	t.Parallel() // each starts servers of its own, on ports the OS picks
	bin := build(t)
	type file struct{ name, text string }
	for _, tc := range []struct {
		name  string
		files []file
		env   []string
		want  string
	}{
		{"a unit that is not one", []file{{"a.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"}}, nil, `invalid rate limit unit "fortnight"`},
		{"not YAML", []file{{"a.yaml", "domain: d\ndescriptors: [\n"}}, nil, "a.yaml"},
		{"an empty domain", []file{{"a.yaml", "domain: \"\"\ndescriptors:\n  - key: k\n"}}, nil, "the domain is empty"},
		{"an empty key", []file{{"a.yaml", "domain: d\ndescriptors:\n  - key: \"\"\n    value: v\n"}}, nil, "a descriptor needs a key"},
		{"a key twice", []file{{"a.yaml", "domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n"}}, nil, "is defined twice"},
		{"a misspelled key", []file{{"a.yaml", "domain: d\ndescriptors:\n  - key: k\n    ratelimit: {unit: second, requests_per_unit: 1}\n"}}, nil, `unknown key "ratelimit"`},
		{"a misspelled key in a limit", []file{{"a.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_units: 1}\n"}}, nil, `unknown key "requests_per_units"`},
		{"a key that is not a string", []file{{"a.yaml", "domain: d\ndescriptors:\n  - key: k\n    7: x\n"}}, nil, "a key must be a string"},
		{"a list of strings for descriptors", []file{{"a.yaml", "domain: d\ndescriptors:\n  - k\n  - v\n"}}, nil, "expected a mapping"},
		{"replaces without a name", []file{{"a.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: \"\"}]}\n"}}, nil, "a replaces entry needs a name"},
		{"a limit that replaces itself", []file{{"a.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: me, unit: second, requests_per_unit: 1, replaces: [{name: me}]}\n"}}, nil, "a limit cannot replace itself"},
		{"unlimited with a unit", []file{{"a.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second, requests_per_unit: 1}\n"}}, nil, "an unlimited rate_limit takes no unit"},
		{"one domain in two files", []file{{"a.yaml", "domain: d\ndescriptors:\n  - key: a\n"}, {"b.yaml", "domain: d\ndescriptors:\n  - key: b\n"}}, nil, `domain "d" is already defined in another file`},
		{"merged domains with a key twice", []file{{"a.yaml", "domain: d\ndescriptors:\n  - key: a\n"}, {"b.yaml", "domain: d\ndescriptors:\n  - key: a\n"}}, []string{"MERGE_DOMAIN_CONFIG=true"}, "defined in two files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{}
			for _, f := range tc.files {
				files[f.name] = f.text
			}
			env := append(runtimeRoot(t, files), tc.env...)
			cmd := exec.Command(bin, "serve", "-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0")
			cmd.Env = append(os.Environ(), env...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 1 {
					t.Fatalf("exit: %v, want status 1\n%s", err, stderr.String())
				}
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("still running on a bad config:\n%s", stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) || !strings.Contains(stderr.String(), ".yaml") {
				t.Fatalf("the refusal does not name the file and say %q:\n%s", tc.want, stderr.String())
			}
		})
	}
	// Merged, the same two files of one domain serve both keys' limits.
	env := runtimeRoot(t, map[string]string{
		"team/a.yaml": "domain: shop\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
		"b.yaml":      "domain: shop\ndescriptors:\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
	})
	p := startWith(t, bin, append(env, "MERGE_DOMAIN_CONFIG=true"), "-addr", "127.0.0.1:0")
	c := rlspb.NewRateLimitServiceClient(dial(t, p.grpc))
	for _, key := range []string{"a", "b"} {
		d := func() []*rlv3.RateLimitDescriptor {
			return []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: key, Value: "x"}}}}
		}
		if got := ask(t, c, 1, d()).OverallCode; got != rlspb.RateLimitResponse_OK {
			t.Fatalf("merged key %s, first call: %v", key, got)
		}
		if got := ask(t, c, 1, d()).OverallCode; got != rlspb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("merged key %s, second call of 1 a minute: %v", key, got)
		}
	}
	p.stop(t)
}

// readmeConfigs are the behaviours of envoyproxy/ratelimit's README
// examples, a domain each, in our own words and with limits small enough
// that no token refills while the test runs.
var readmeConfigs = map[string]string{
	// A key's values, each with a limit of its own.
	"values.yaml": `
domain: db
descriptors:
  - key: table
    value: users
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: table
    value: orders
    rate_limit: {unit: minute, requests_per_unit: 2}
`,
	// A nested key without a value: a bucket per value under a
	// placeholder level; and a top-level key's own limit per value.
	"nested.yaml": `
domain: sms
descriptors:
  - key: kind
    value: promo
    descriptors:
      - key: phone
        rate_limit: {unit: day, requests_per_unit: 2}
  - key: phone
    rate_limit: {unit: day, requests_per_unit: 3}
`,
	// The most specific match: a value's own limit (0, a block list)
	// before the key's.
	"specific.yaml": `
domain: ip
descriptors:
  - key: addr
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: addr
    value: 192.0.2.66
    rate_limit: {unit: minute, requests_per_unit: 0}
`,
	// A descriptor matches only at its own depth.
	"depth.yaml": `
domain: depth
descriptors:
  - key: top
    value: one
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: top
    value: two
    descriptors:
      - key: sub
        rate_limit: {unit: minute, requests_per_unit: 1}
`,
	// Unlimited beside limited.
	"unlimited.yaml": `
domain: internal
descriptors:
  - key: directory
    rate_limit: {unlimited: true}
  - key: storage
    rate_limit: {unit: minute, requests_per_unit: 1}
`,
	// Shadow mode for one value, a limit for another.
	"shadow.yaml": `
domain: auth
descriptors:
  - key: service
    descriptors:
      - key: user
        value: trial
        shadow_mode: true
        rate_limit: {unit: minute, requests_per_unit: 2}
      - key: user
        value: paid
        rate_limit: {unit: minute, requests_per_unit: 2}
`,
	// A limit replaced in requests that match the replacing one.
	"replaces.yaml": `
domain: rep
descriptors:
  - key: area
    value: north
    descriptors:
      - key: user
        value: ann
        rate_limit: {name: narrow, unit: minute, requests_per_unit: 1}
  - key: area
    value: south
    descriptors:
      - key: user
        value: ann
        rate_limit: {replaces: [{name: narrow}], unit: minute, requests_per_unit: 2}
`,
	// detailed_metric: a key without a value counted under each value.
	"detailed.yaml": `
domain: detailed
descriptors:
  - key: client
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: client
    value: known
    rate_limit: {unit: minute, requests_per_unit: 5}
`,
	// Wildcards: trailing, in the middle, several.
	"wildcards.yaml": `
domain: wild
descriptors:
  - key: name
    value: img*
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: path
    value: /v1/*/edit
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: route
    value: /v1/*/items/*/buy
    rate_limit: {unit: minute, requests_per_unit: 1}
`,
	// value_to_metric: the request's values in the stats key.
	"tometric.yaml": `
domain: tometric
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        value_to_metric: true
        descriptors:
          - key: subject
            rate_limit: {unit: minute, requests_per_unit: 5}
`,
	// share_threshold: the values a wildcard matches share one bucket, or
	// each has its own.
	"share.yaml": `
domain: share
descriptors:
  - key: doc
    value: docs/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: own
    value: own/*
    rate_limit: {unit: hour, requests_per_unit: 3}
`,
}

func TestThePeersREADMEExamples(t *testing.T) {
	t.Parallel() // each starts servers of its own, on ports the OS picks
	p := startWith(t, build(t), runtimeRoot(t, readmeConfigs), "-addr", "127.0.0.1:0", "-rule-metrics")
	c := rlspb.NewRateLimitServiceClient(dial(t, p.grpc))
	call := func(domain string, ds ...[]string) *rlspb.RateLimitResponse {
		t.Helper()
		req := &rlspb.RateLimitRequest{Domain: domain}
		for _, kv := range ds {
			d := &rlv3.RateLimitDescriptor{}
			for i := 0; i+1 < len(kv); i += 2 {
				d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
			}
			req.Descriptors = append(req.Descriptors, d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := c.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	const ok, over = rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OVER_LIMIT
	expect := func(what string, want []rlspb.RateLimitResponse_Code, domain string, ds ...[]string) {
		t.Helper()
		for i, w := range want {
			if got := call(domain, ds...).OverallCode; got != w {
				t.Fatalf("%s, call %d: %v, want %v", what, i+1, got, w)
			}
		}
	}

	expect("a value's own limit", []rlspb.RateLimitResponse_Code{ok, ok, over}, "db", []string{"table", "users"})
	expect("another value's own bucket", []rlspb.RateLimitResponse_Code{ok, ok, over}, "db", []string{"table", "orders"})
	expect("a value with no limit", []rlspb.RateLimitResponse_Code{ok, ok, ok}, "db", []string{"table", "logs"})

	// Both descriptors in one call: the answer is over when either is.
	promoA := []string{"kind", "promo", "phone", "555-0101"}
	expect("a nested bucket per value, with the top-level one", []rlspb.RateLimitResponse_Code{ok, ok, over}, "sms", promoA, []string{"phone", "555-0101"})
	expect("another phone's nested bucket", []rlspb.RateLimitResponse_Code{ok, ok, over}, "sms", []string{"kind", "promo", "phone", "555-0102"})
	// All or nothing: the denied call spent nothing, so 555-0101's own
	// limit of 3 has one left (the peer counts the denied hit too).
	expect("the top-level limit after a denied call", []rlspb.RateLimitResponse_Code{ok, over}, "sms", []string{"phone", "555-0101"})

	expect("a blocked address", []rlspb.RateLimitResponse_Code{over}, "ip", []string{"addr", "192.0.2.66"})
	expect("any other address", []rlspb.RateLimitResponse_Code{ok, ok, ok, over}, "ip", []string{"addr", "192.0.2.1"})

	expect("a descriptor deeper than its rule", []rlspb.RateLimitResponse_Code{ok, ok, ok}, "depth", []string{"top", "one", "sub", "x"})
	expect("a descriptor at its rule's depth", []rlspb.RateLimitResponse_Code{ok, over}, "depth", []string{"top", "two", "sub", "x"})
	expect("a level without a limit", []rlspb.RateLimitResponse_Code{ok, ok}, "depth", []string{"top", "two"})

	st := call("internal", []string{"directory", "x"}).Statuses[0]
	if st.Code != ok || st.LimitRemaining != math.MaxUint32 {
		t.Fatalf("unlimited: %v, want OK with %d remaining", st, uint32(math.MaxUint32))
	}
	expect("limited beside it", []rlspb.RateLimitResponse_Code{ok, over}, "internal", []string{"storage", "x"})

	expect("a shadowed value", []rlspb.RateLimitResponse_Code{ok, ok, ok, ok}, "auth", []string{"service", "login", "user", "trial"})
	expect("a limited value", []rlspb.RateLimitResponse_Code{ok, ok, over}, "auth", []string{"service", "login", "user", "paid"})

	north := []string{"area", "north", "user", "ann"}
	south := []string{"area", "south", "user", "ann"}
	expect("north alone", []rlspb.RateLimitResponse_Code{ok, over}, "rep", north)
	expect("north replaced by south: south's 2", []rlspb.RateLimitResponse_Code{ok, ok, over}, "rep", north, south)

	for _, v := range []string{"alpha", "beta", "known"} {
		expect("detailed "+v, []rlspb.RateLimitResponse_Code{ok}, "detailed", []string{"client", v})
	}
	expect("a trailing wildcard", []rlspb.RateLimitResponse_Code{ok, over}, "wild", []string{"name", "img-1"})
	expect("a trailing wildcard's own bucket per value", []rlspb.RateLimitResponse_Code{ok}, "wild", []string{"name", "img-2"})
	expect("not the trailing wildcard", []rlspb.RateLimitResponse_Code{ok, ok}, "wild", []string{"name", "pic-1"})
	expect("a middle wildcard", []rlspb.RateLimitResponse_Code{ok, over}, "wild", []string{"path", "/v1/42/edit"})
	expect("not the middle wildcard", []rlspb.RateLimitResponse_Code{ok, ok}, "wild", []string{"path", "/v1/42/view"})
	expect("several wildcards", []rlspb.RateLimitResponse_Code{ok, over}, "wild", []string{"route", "/v1/a/items/7/buy"})
	expect("not several wildcards", []rlspb.RateLimitResponse_Code{ok, ok}, "wild", []string{"route", "/v1/a/items/7/sell"})

	expect("value_to_metric", []rlspb.RateLimitResponse_Code{ok}, "tometric", []string{"route", "api", "method", "GET", "subject", "s1"})

	expect("a shared wildcard bucket", []rlspb.RateLimitResponse_Code{ok, ok}, "share", []string{"doc", "docs/a.pdf"})
	expect("the shared bucket, from another value", []rlspb.RateLimitResponse_Code{ok, over}, "share", []string{"doc", "docs/b.csv"})
	expect("an unshared wildcard", []rlspb.RateLimitResponse_Code{ok, ok, ok, over}, "share", []string{"own", "own/a.pdf"})
	expect("an unshared wildcard's other value", []rlspb.RateLimitResponse_Code{ok, ok, ok, over}, "share", []string{"own", "own/b.csv"})

	_, metrics := get(t, "http://"+p.http+"/metrics")
	for _, key := range []string{
		"detailed.client_alpha", "detailed.client_beta", "detailed.client_known",
		"tometric.route_api.method_GET.subject",
		"share.doc_docs/*",
	} {
		if !strings.Contains(metrics, `gopherpace_rls_hits_total{key="`+key+`",stat="total_hits"}`) {
			t.Errorf("no total_hits under the stats key %q:\n%s", key, grepLines(metrics, "gopherpace_rls_hits_total"))
		}
	}
}
