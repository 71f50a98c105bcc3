package adapter_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/clientip"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

func newLimiter(t testing.TB, rate, bucketSize int64) *gopherpace.Limiter {
	t.Helper()
	l, err := gopherpace.New(gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(bucketSize))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestConfigureReportsEveryProblemWithThePrefix(t *testing.T) {
	l := newLimiter(t, 1, 1)
	_, err := adapter.Configure(l, "somepace", []adapter.Option{
		adapter.IPv6Prefix(0), adapter.PolicyName("two\nlines"), adapter.Headers(42), adapter.Refund(nil),
		adapter.TrustedProxies(netip.Prefix{}),
	}, errors.New("nil KeyFunc"))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d problems reported, want 6:\n%v", len(lines), err)
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, "somepace: ") {
			t.Errorf("%q lacks the prefix", line)
		}
	}
	if _, err := adapter.Configure(nil, "somepace", nil); err == nil || err.Error() != "somepace: nil Limiter" {
		t.Fatalf("nil limiter: %v", err)
	}
	g, err := adapter.Configure(l, "somepace", []adapter.Option{adapter.PolicyName("api"), adapter.IPv6Prefix(48)})
	if err != nil || g.PolicyName() != "api" || g.Limiter() != l {
		t.Fatalf("valid options: %v, %v", g, err)
	}
}

func TestStatusOfErrors(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
	}{
		{adapter.ErrMissingKey, 400},
		{fmt.Errorf("tenant: %w", adapter.ErrMissingKey), 400},
		{gopherpace.ErrInvalidCost, 400},
		{gopherpace.ErrCostExceedsLimit, 400},
		{clientip.ErrNoClientIP, 500},
		{errors.New("directory down"), 500},
	} {
		if got := adapter.Status(tc.err); got != tc.status {
			t.Errorf("Status(%v) = %d, want %d", tc.err, got, tc.status)
		}
		if adapter.ClientFault(tc.err) != (tc.status == 400) {
			t.Errorf("ClientFault(%v) = %v", tc.err, !(tc.status == 400))
		}
	}
}

func TestDecideFieldsAndRefunds(t *testing.T) {
	l := newLimiter(t, 1, 2)
	g, err := adapter.Configure(l, "x", []adapter.Option{adapter.Refund(adapter.RefundServerErrors), adapter.PolicyName("p")})
	if err != nil {
		t.Fatal(err)
	}
	take := func(cost int64) (adapter.Request, error) {
		r := adapter.Request{Cost: cost}
		r.Keys[0] = "k"
		return r, g.Decide(&r)
	}
	r, err := take(1)
	if d := r.Decision(); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("Decide: %+v %v", d, err)
	}
	g.RefundFor(&r, 404) // not refunded
	g.RefundFor(&r, 503) // refunded
	if r, _ := take(2); !r.Decision().Allowed {
		t.Fatalf("after a 503's refund the bucket holds 2: %+v", r.Decision())
	}
	if _, err := take(3); !errors.Is(err, gopherpace.ErrCostExceedsLimit) {
		t.Fatalf("cost 3 of a bucket of 2: %v", err)
	}
	denied, _ := take(1)
	g.RefundFor(&denied, 503) // a denial spent nothing: nothing comes back
	if d := l.Peek("k"); d.Allowed {
		t.Fatalf("a refunded denial added tokens: %+v", d)
	}
	h := http.Header{}
	g.SetHeaders(h, &denied)
	var f adapter.Fields
	g.RenderRequest(&f, &denied)
	if f.Len() != len(h) || h.Get("Retry-After") != "1" || h.Get("RateLimit-Policy") != `"p";q=2;w=2` {
		t.Fatalf("fields %v (%d rendered)", h, f.Len())
	}
	for i := range f.Len() {
		if h.Get(f.Name(i)) != f.Value(i) {
			t.Errorf("%s: RenderRequest %q, SetHeaders %q", f.Name(i), f.Value(i), h.Get(f.Name(i)))
		}
	}
	none, _ := adapter.Configure(l, "x", []adapter.Option{adapter.Headers(headers.None)})
	if none.HasFields(&r) || !none.HasFields(&denied) || !g.HasFields(&r) {
		t.Fatal("HasFields: want fields on every denial, and on admits unless the style is None")
	}
	if none.AdmitsHaveFields() || !g.AdmitsHaveFields() {
		t.Fatal("AdmitsHaveFields: want fields on admits unless the style is None")
	}
}

// With further limits, a request is decided by all of them; the fields
// list every policy, and the denial names the policy that denied.
func TestFurtherLimits(t *testing.T) {
	own, perKey := newLimiter(t, 1, 2), newLimiter(t, 1, 1)
	g, err := adapter.Configure(own, "x", []adapter.Option{adapter.PolicyName("own"), adapter.Also(perKey, "per-key")})
	if err != nil || g.Limits() != 2 {
		t.Fatalf("%v, %d limits", err, g.Limits())
	}
	r := adapter.Request{Keys: [adapter.MaxLimits]string{"client", "key"}, Cost: 1}
	if err := g.Decide(&r); err != nil || !r.Decision().Allowed {
		t.Fatalf("first: %+v %v", r.Decision(), err)
	}
	h := http.Header{}
	g.SetHeaders(h, &r)
	if h.Get("RateLimit-Policy") != `"own";q=2;w=2, "per-key";q=1;w=1` {
		t.Fatalf("fields %v", h)
	}
	r2 := adapter.Request{Keys: [adapter.MaxLimits]string{"client", "key"}, Cost: 1}
	if err := g.Decide(&r2); err != nil || r2.Decision().Allowed || g.DeniedBy(&r2) != "per-key" {
		t.Fatalf("second: %+v %v, denied by %q", r2.Decision(), err, g.DeniedBy(&r2))
	}
	if d := own.Peek("client"); d.Remaining != 1 {
		t.Fatalf("the own limit lost a token to a request the further one denied: %+v", d)
	}
	for _, bad := range [][]adapter.Option{
		{adapter.Also(nil, "p")}, {adapter.Also(perKey, "")}, {adapter.Also(own, "again")},
		{adapter.Also(newLimiter(t, 1, 1), "a"), adapter.Also(newLimiter(t, 1, 1), "b"), adapter.Also(newLimiter(t, 1, 1), "c"), adapter.Also(newLimiter(t, 1, 1), "d")},
	} {
		if _, err := adapter.Configure(own, "x", bad); err == nil || !strings.HasPrefix(err.Error(), "x: ") {
			t.Errorf("%d further limits: error %v", len(bad), err)
		}
	}
}

// Decide, SetHeaders and RenderRequest allocate nothing once the values
// were sent before.
func TestFieldsAllocations(t *testing.T) {
	l := newLimiter(t, 1e9, 1e9)
	for _, style := range []headers.Style{headers.Draft, headers.Legacy, headers.Both} {
		g, err := adapter.Configure(l, "x", []adapter.Option{adapter.Headers(style)})
		if err != nil {
			t.Fatal(err)
		}
		var r adapter.Request
		r.Cost = 1
		if n := testing.AllocsPerRun(100, func() { g.Decide(&r) }); n != 0 {
			t.Errorf("style %d: Decide allocates %.0f times, want 0", style, n)
		}
		h := http.Header{}
		if n := testing.AllocsPerRun(100, func() { g.SetHeaders(h, &r) }); n != 0 {
			t.Errorf("style %d: SetHeaders allocates %.0f times, want 0", style, n)
		}
		var f adapter.Fields
		if n := testing.AllocsPerRun(100, func() { g.RenderRequest(&f, &r) }); n != 0 {
			t.Errorf("style %d: RenderRequest allocates %.0f times, want 0", style, n)
		}
	}
}

// Errors keep their chains through Configure: errors.Is finds the sentinel
// an option returned, under the adapter's prefix, whether the option or
// the Gate found it. A further limit that is the gate's own limiter, or
// another further limit's, is named in WithAlso's words.
func TestErrorsKeepTheirChains(t *testing.T) {
	l := newLimiter(t, 1, 1)
	for name, opts := range map[string][]adapter.Option{
		"option":             {adapter.PolicyName("")},
		"further limit":      {adapter.Also(newLimiter(t, 1, 1), "bad name\n")},
		"two bad, one named": {adapter.IPv6Prefix(0), adapter.PolicyName("")},
	} {
		_, err := adapter.Configure(l, "someadapter", opts)
		if !errors.Is(err, headers.ErrPolicyName) || !strings.HasPrefix(err.Error(), "someadapter: ") {
			t.Errorf("%s: errors.Is(%v, headers.ErrPolicyName) is false, or the prefix is missing", name, err)
		}
	}
	_, err := adapter.Configure(l, "someadapter", []adapter.Option{adapter.Also(l, "hourly")})
	if err == nil || !strings.Contains(err.Error(), `WithAlso("hourly") is given the middleware's own limiter`) {
		t.Errorf("own limiter as a further limit: %v", err)
	}
	other := newLimiter(t, 1, 1)
	_, err = adapter.Configure(l, "someadapter", []adapter.Option{adapter.Also(other, "a"), adapter.Also(other, "b")})
	if err == nil || !strings.Contains(err.Error(), `WithAlso("b") is given the same limiter as WithAlso("a")`) {
		t.Errorf("one limiter in two further limits: %v", err)
	}
}

// AdmittedDraft gives an admit's two draft fields as RenderRequest renders
// them, for random costs and bucket sizes, and declines everything else:
// a denial, another style, further limits.
func TestAdmittedDraftIsTheRenderedFields(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		bucketSize := 1 + rng.Int64N(50)
		l := newLimiter(t, 1+rng.Int64N(1000), bucketSize)
		style := []headers.Style{headers.Draft, headers.Legacy, headers.Both, headers.None}[rng.IntN(4)]
		g, err := adapter.Configure(l, "x", []adapter.Option{adapter.Headers(style)})
		if err != nil {
			t.Fatal(err)
		}
		r := adapter.Request{Cost: 1 + rng.Int64N(bucketSize)}
		r.Keys[0] = "k"
		for range 1 + rng.IntN(3) { // a later one may be denied
			if err := g.Decide(&r); err != nil {
				t.Fatal(err)
			}
		}
		p, lim, ok := g.AdmittedDraft(&r)
		if want := style == headers.Draft && r.Decision().Allowed; ok != want {
			t.Fatalf("%v, %+v: AdmittedDraft ok = %v", style, r.Decision(), ok)
		}
		if !ok {
			continue
		}
		var f adapter.Fields
		g.RenderRequest(&f, &r)
		if f.Len() != 2 || f.Name(0) != headers.RateLimitPolicy || f.Value(0) != p || f.Name(1) != headers.RateLimit || f.Value(1) != lim {
			t.Fatalf("AdmittedDraft %q, %q; RenderRequest %d fields: %s=%q, %s=%q", p, lim, f.Len(), f.Name(0), f.Value(0), f.Name(1), f.Value(1))
		}
	}
	own, further := newLimiter(t, 1, 2), newLimiter(t, 1, 2)
	g, _ := adapter.Configure(own, "x", []adapter.Option{adapter.Also(further, "f")})
	r := adapter.Request{Keys: [adapter.MaxLimits]string{"a", "b"}, Cost: 1}
	if err := g.Decide(&r); err != nil || !r.Decision().Allowed {
		t.Fatal(err)
	}
	if _, _, ok := g.AdmittedDraft(&r); ok {
		t.Fatal("AdmittedDraft with further limits: their fields list every policy")
	}
}

// The in-flight limit's policy name is its own: a rate named the same,
// the gate's or a further limit's, is refused with a reason.
func TestInFlightPolicyNameIsTaken(t *testing.T) {
	f, err := gopherpace.NewInFlight(3)
	if err != nil {
		t.Fatal(err)
	}
	l := newLimiter(t, 1, 2)
	for _, opts := range [][]adapter.Option{
		{adapter.Concurrency(f), adapter.PolicyName("inflight")},
		{adapter.Concurrency(f), adapter.Also(newLimiter(t, 1, 1), "inflight")},
	} {
		if _, err := adapter.Configure(l, "x", opts); err == nil || !strings.Contains(err.Error(), `"inflight" is the in-flight limit's`) {
			t.Errorf("error %v", err)
		}
	}
	g, err := adapter.Configure(l, "x", []adapter.Option{adapter.Concurrency(f), adapter.Also(newLimiter(t, 1, 1), "per-key")})
	if err != nil {
		t.Fatal(err)
	}
	r := adapter.Request{Keys: [adapter.MaxLimits]string{"client", "key"}, Cost: 1}
	if err := g.Decide(&r); err != nil || !r.Decision().Allowed {
		t.Fatalf("%+v %v", r.Decision(), err)
	}
	h := http.Header{}
	g.SetHeaders(h, &r)
	// Decide alone takes no slot: all three are free.
	if got := h.Get("RateLimit"); got != `"default";r=1;t=1, "per-key";r=0;t=1, "inflight";r=3` {
		t.Fatalf("RateLimit %q", got)
	}
}
