package adapter_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/clientip"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

func newLimiter(t testing.TB, rate, burst int64) *gopherpace.Limiter {
	t.Helper()
	l, err := gopherpace.New(gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(burst))
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

// Forwarding fields are read only for a trusted peer: the func that reads
// them is never called for another.
func TestClientKeyReadsFieldsOnlyFromTrustedPeers(t *testing.T) {
	l := newLimiter(t, 1, 1)
	g, err := adapter.Configure(l, "x", []adapter.Option{adapter.TrustedProxies(netip.MustParsePrefix("10.0.0.0/8"))})
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	fields := func() ([]string, string) { read++; return []string{"6.6.6.6, 198.51.100.7"}, "" }
	var buf [64]byte
	if k := string(g.ClientKeyAddr(buf[:0], netip.MustParseAddr("203.0.113.1"), fields)); k != "203.0.113.1" || read != 0 {
		t.Fatalf("untrusted peer: key %q, fields read %d times", k, read)
	}
	if k := string(g.ClientKeyAddr(buf[:0], netip.MustParseAddr("10.1.2.3"), fields)); k != "198.51.100.7" || read != 1 {
		t.Fatalf("trusted peer: key %q, fields read %d times", k, read)
	}
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "[2001:db8:1:2::5]:443"
	if k, err := g.RequestKey(buf[:0], r); err != nil || string(k) != "2001:db8:1:2::/64" {
		t.Fatalf("IPv6 peer: %q, %v", k, err)
	}
	r.RemoteAddr = "@"
	if _, err := g.RequestKey(buf[:0], r); !errors.Is(err, clientip.ErrNoClientIP) {
		t.Fatalf("Unix socket peer: %v", err)
	}
}

func TestTakeFieldsAndRefunds(t *testing.T) {
	l := newLimiter(t, 1, 2)
	g, err := adapter.Configure(l, "x", []adapter.Option{adapter.Refund(adapter.RefundServerErrors), adapter.PolicyName("p")})
	if err != nil {
		t.Fatal(err)
	}
	d, now, err := g.Take("k", 1)
	if err != nil || !d.Allowed || d.Remaining != 1 || now.IsZero() {
		t.Fatalf("Take: %+v %v %v", d, now, err)
	}
	g.Refund("k", 1, 404) // not refunded
	g.Refund("k", 1, 503) // refunded
	if d, _, _ := g.Take("k", 2); !d.Allowed {
		t.Fatalf("after a 503's refund the bucket holds 2: %+v", d)
	}
	if _, _, err := g.Take("k", 3); !errors.Is(err, gopherpace.ErrCostExceedsLimit) {
		t.Fatalf("cost 3 of a bucket of 2: %v", err)
	}
	denied, at, _ := g.Take("k", 1)
	h := http.Header{}
	g.SetHeader(h, denied, at)
	var f adapter.Fields
	g.Render(&f, denied, at)
	if f.Len() != len(h) || h.Get("Retry-After") != "1" || h.Get("RateLimit-Policy") != `"p";q=2;w=2` {
		t.Fatalf("fields %v (%d rendered)", h, f.Len())
	}
	for i := range f.Len() {
		if h.Get(f.Name(i)) != f.Value(i) {
			t.Errorf("%s: Render %q, SetHeader %q", f.Name(i), f.Value(i), h.Get(f.Name(i)))
		}
	}
	none, _ := adapter.Configure(l, "x", []adapter.Option{adapter.Headers(headers.None)})
	if none.HasFields(d) || !none.HasFields(denied) || !g.HasFields(d) {
		t.Fatal("HasFields: want fields on every denial, and on admits unless the style is None")
	}
}

// SetHeader costs one allocation, Render none.
func TestFieldsAllocations(t *testing.T) {
	l := newLimiter(t, 1e9, 1e9)
	for _, style := range []headers.Style{headers.Draft, headers.Legacy, headers.Both} {
		g, err := adapter.Configure(l, "x", []adapter.Option{adapter.Headers(style)})
		if err != nil {
			t.Fatal(err)
		}
		d, now, _ := g.Take("", 1)
		h := http.Header{}
		if n := testing.AllocsPerRun(100, func() { g.SetHeader(h, d, now) }); n != 1 {
			t.Errorf("style %d: SetHeader allocates %.0f times, want 1", style, n)
		}
		var f adapter.Fields
		if n := testing.AllocsPerRun(100, func() { g.Render(&f, d, now) }); n != 0 {
			t.Errorf("style %d: Render allocates %.0f times, want 0", style, n)
		}
	}
}
