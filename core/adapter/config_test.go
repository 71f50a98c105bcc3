package adapter_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
)

type (
	deny   func(http.ResponseWriter, *http.Request, gopherpace.Decision)
	onErr  func(http.ResponseWriter, *http.Request, error)
	usage  func(*http.Request) int64
	config = adapter.Config[*http.Request, deny, onErr, usage]
	option func(*config)
)

// Every setter refuses a nil func, and a nil option is a problem too:
// Build reports them all at once, each with the adapter's prefix, and
// builds nothing.
func TestConfigReportsEveryNilAtOnce(t *testing.T) {
	l := newLimiter(t, 10, 10)
	var c config
	opts := []option{
		func(c *config) { c.SetKey(nil) },
		func(c *config) { c.SetCost(nil) },
		func(c *config) { c.SetSkip(nil) },
		func(c *config) { c.SetDeny(nil) },
		func(c *config) { c.SetOnError(nil) },
		func(c *config) { c.SetUsage(nil) },
		func(c *config) { c.AddAlso(nil, nil, "hourly") },
		nil,
	}
	adapter.Apply(&c, opts, c.Require)
	g, f, err := c.Build(l, "testpace", adapter.Hooks[*http.Request]{Peer: adapter.RequestPeer, Forwarded: adapter.RequestForwarded})
	if err == nil || g != nil || f != nil {
		t.Fatalf("built %v %v with nil funcs: %v", g, f, err)
	}
	for _, want := range []string{"nil KeyFunc", "nil cost func", "nil skip func", "nil deny handler", "nil error handler", "nil usage func", "nil Limiter", "nil Option"} {
		if !strings.Contains(err.Error(), "testpace: "+want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
}

// Build wires the options' key, cost and skip into the flow, and says
// whether the adapter settles.
func TestConfigBuildsTheFlowOfItsOptions(t *testing.T) {
	l := newLimiter(t, 1, 3)
	var c config
	errNoTenant := errors.New("no tenant")
	adapter.Apply(&c, []option{
		func(c *config) {
			c.SetKey(func(r *http.Request) (string, error) {
				if k := r.Header.Get("Tenant"); k != "" {
					return k, nil
				}
				return "", errNoTenant
			})
		},
		func(c *config) { c.SetCost(func(*http.Request) int64 { return 2 }) },
		func(c *config) { c.SetSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }) },
		func(c *config) { c.SetUsage(func(*http.Request) int64 { return 1 }) },
	}, c.Require)
	if !c.Settles() {
		t.Fatal("a usage func set, and the config does not settle")
	}
	_, f, err := c.Build(l, "testpace", adapter.Hooks[*http.Request]{Peer: adapter.RequestPeer, Forwarded: adapter.RequestForwarded})
	if err != nil {
		t.Fatal(err)
	}
	step := func(path, tenant string) adapter.Step {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if tenant != "" {
			r.Header.Set("Tenant", tenant)
		}
		var req adapter.Request
		return f.Decide(r, &req)
	}
	if s := step("/healthz", ""); s != adapter.Skip {
		t.Errorf("/healthz: step %v, want Skip", s)
	}
	if s := step("/", ""); s != adapter.Fail {
		t.Errorf("no tenant: step %v, want Fail", s)
	}
	// A bucket of 3 at a cost of 2: one admit per tenant, then a denial.
	for _, want := range []adapter.Step{adapter.Admit, adapter.Deny} {
		if s := step("/", "acme"); s != want {
			t.Errorf("acme: step %v, want %v", s, want)
		}
	}
	if s := step("/", "globex"); s != adapter.Admit {
		t.Errorf("globex, its own bucket: step %v, want Admit", s)
	}
}
