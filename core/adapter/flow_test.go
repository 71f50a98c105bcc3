package adapter_test

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/clientip"
)

// A fake request of a framework that has the peer's address parsed, as
// fasthttp and gRPC do.
type parsed struct {
	addr  netip.Addr
	name  string
	xff   []string
	reads int
}

func parsedHooks() adapter.Hooks[*parsed] {
	return adapter.Hooks[*parsed]{
		Peer:      func(r *parsed) (netip.Addr, string) { return r.addr, r.name },
		Forwarded: func(r *parsed) ([]string, string) { r.reads++; return r.xff, "" },
	}
}

func mustFlow[C any](t testing.TB, g *adapter.Gate, h adapter.Hooks[C]) *adapter.Flow[C] {
	t.Helper()
	f, err := adapter.NewFlow(g, h)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustGate(t testing.TB, l *gopherpace.Limiter, opts ...adapter.Option) *adapter.Gate {
	t.Helper()
	g, err := adapter.Configure(l, "x", opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The default key is the client's address, from either kind of peer; the
// forwarding fields are read only for a trusted peer.
func TestFlowKeysByClientAddress(t *testing.T) {
	g := mustGate(t, newLimiter(t, 1, 100), adapter.TrustedProxies(netip.MustParsePrefix("10.0.0.0/8")))
	f := mustFlow(t, g, parsedHooks())
	for _, tc := range []struct {
		addr      string
		xff       []string
		key       string
		fieldRead int
	}{
		{"203.0.113.1", []string{"6.6.6.6"}, "203.0.113.1", 0},
		{"10.1.2.3", []string{"6.6.6.6, 198.51.100.7"}, "198.51.100.7", 1},
		{"2001:db8:1:2::5", nil, "2001:db8:1:2::/64", 0},
		{"::ffff:192.0.2.9", nil, "192.0.2.9", 0},
	} {
		r := &parsed{addr: netip.MustParseAddr(tc.addr), xff: tc.xff}
		var req adapter.Request
		if s := f.Decide(r, &req); s != adapter.Admit || req.Key(0) != tc.key || r.reads != tc.fieldRead {
			t.Errorf("peer %s: step %d, key %q, fields read %d times; want key %q, read %d", tc.addr, s, req.Key(0), r.reads, tc.key, tc.fieldRead)
		}
	}
	// net/http's RemoteAddr, each form.
	hf := mustFlow(t, mustGate(t, newLimiter(t, 1, 100)), adapter.Hooks[*http.Request]{Peer: adapter.RequestPeer, Forwarded: adapter.RequestForwarded})
	for addr, want := range map[string]string{"192.0.2.1:80": "192.0.2.1", "[2001:db8:1:2::5]:443": "2001:db8:1:2::/64", "[::ffff:192.0.2.1]:80": "192.0.2.1"} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = addr
		r.Header.Set("X-Forwarded-For", "6.6.6.6") // untrusted: ignored
		var req adapter.Request
		if s := hf.Decide(r, &req); s != adapter.Admit || req.Key(0) != want {
			t.Errorf("RemoteAddr %s: step %d, key %q, want %q", addr, s, req.Key(0), want)
		}
	}
}

// The shortcut for net/http's IPv4 addresses keys every address as the
// parsing path does, with and without trusted proxies (which turn it off).
func TestFlowIPv4ShortcutKeysAsParsing(t *testing.T) {
	l := newLimiter(t, 1<<20, 1<<20)
	h := adapter.Hooks[*http.Request]{Peer: adapter.RequestPeer, Forwarded: adapter.RequestForwarded}
	fast := mustFlow(t, mustGate(t, l), h)
	slow := mustFlow(t, mustGate(t, l, adapter.TrustedProxies(netip.MustParsePrefix("198.18.0.0/15"))), h)
	rng := rand.New(rand.NewPCG(1, 2))
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	for range 2000 {
		a := netip.AddrFrom4([4]byte{byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))})
		r.RemoteAddr = netip.AddrPortFrom(a, uint16(rng.IntN(65536))).String()
		var q1, q2 adapter.Request
		s1, s2 := fast.Decide(r, &q1), slow.Decide(r, &q2)
		if s1 != adapter.Admit || s2 != adapter.Admit || q1.Key(0) != q2.Key(0) || q1.Key(0) != a.String() {
			t.Fatalf("%s: keys %q and %q (steps %d, %d)", r.RemoteAddr, q1.Key(0), q2.Key(0), s1, s2)
		}
	}
}

// A peer that is not IP is a server error, or keyed by its name where the
// framework says so.
func TestFlowPeersThatAreNotIP(t *testing.T) {
	g := mustGate(t, newLimiter(t, 1, 10))
	var req adapter.Request
	if s := mustFlow(t, g, parsedHooks()).Decide(&parsed{name: "@"}, &req); s != adapter.Fail || !errors.Is(req.Err(), clientip.ErrNoClientIP) {
		t.Fatalf("step %d, error %v; want Fail with ErrNoClientIP", s, req.Err())
	}
	if status, msg := adapter.Answer(req.Err()); status != 500 || msg != adapter.ServerErrorMessage {
		t.Fatalf("answer %d %q", status, msg)
	}
	h := parsedHooks()
	h.NamedPeers = true
	req = adapter.Request{}
	if s := mustFlow(t, g, h).Decide(&parsed{name: "@"}, &req); s != adapter.Admit || req.Key(0) != "@" {
		t.Fatalf("named peer: step %d, key %q", s, req.Key(0))
	}
	req = adapter.Request{}
	if s := mustFlow(t, g, h).Decide(&parsed{}, &req); s != adapter.Fail {
		t.Fatalf("no peer at all: step %d, want Fail", s)
	}
}

// Each step of the flow: skipped requests and failed ones spend nothing;
// a denial is Deny; the cost hook sets the tokens; a cost the bucket can
// never grant is the request's fault.
func TestFlowSteps(t *testing.T) {
	l := newLimiter(t, 1, 3)
	g := mustGate(t, l)
	missing := adapter.MissingKey("the X-Key header")
	h := adapter.Hooks[*parsed]{
		Key: func(r *parsed) (string, error) {
			if r.name == "" {
				return "", missing
			}
			return r.name, nil
		},
		Skip:      func(r *parsed) bool { return r.name == "skip" },
		Cost:      func(r *parsed) int64 { return int64(len(r.xff)) + 1 },
		Peer:      parsedHooks().Peer,
		Forwarded: parsedHooks().Forwarded,
	}
	f := mustFlow(t, g, h)
	step := func(r *parsed) (adapter.Step, adapter.Request) {
		var req adapter.Request
		return f.Decide(r, &req), req
	}
	if s, _ := step(&parsed{name: "skip"}); s != adapter.Skip {
		t.Fatalf("skip: step %d", s)
	}
	s, req := step(&parsed{})
	if status, msg := adapter.Answer(req.Err()); s != adapter.Fail || !errors.Is(req.Err(), adapter.ErrMissingKey) || status != 400 || !strings.Contains(msg, "the X-Key header is missing") {
		t.Fatalf("missing key: step %d, %v, answer %d %q", s, req.Err(), status, msg)
	}
	if s, req := step(&parsed{name: "k", xff: make([]string, 3)}); s != adapter.Fail || !errors.Is(req.Err(), gopherpace.ErrCostExceedsLimit) {
		t.Fatalf("cost 4 of a bucket of 3: step %d, %v", s, req.Err())
	}
	if s, req := step(&parsed{name: "k", xff: make([]string, 2)}); s != adapter.Admit || req.Cost != 3 || req.Decision().Remaining != 0 {
		t.Fatalf("cost 3: step %d, cost %d, %+v", s, req.Cost, req.Decision())
	}
	if s, _ := step(&parsed{name: "k"}); s != adapter.Deny {
		t.Fatalf("an empty bucket: step %d, want Deny", s)
	}
	if d := l.Peek("k"); d.Remaining != 0 {
		t.Fatalf("the failed and skipped requests spent: %+v", d)
	}
}

// Further limits: a nil key func shares the own key, even one held in the
// Request; the keys a framework may reuse are copied when refunds need
// them later; a copied Request keeps its own keys.
func TestFlowFurtherLimitsAndKeptKeys(t *testing.T) {
	own, per := newLimiter(t, 1, 10), newLimiter(t, 1, 10)
	g := mustGate(t, own, adapter.Also(per, "per"), adapter.Refund(adapter.RefundFailed))
	h := parsedHooks()
	h.Also = []func(*parsed) (string, error){nil}
	h.KeysOutliveRequest = true
	f := mustFlow(t, g, h)
	var req adapter.Request
	if s := f.Decide(&parsed{addr: netip.MustParseAddr("192.0.2.7")}, &req); s != adapter.Admit || req.Key(0) != "192.0.2.7" || req.Key(1) != "192.0.2.7" {
		t.Fatalf("step %d, keys %q %q", s, req.Key(0), req.Key(1))
	}
	copied := req
	req = adapter.Request{} // the original is gone; the copy still names its buckets
	f.Finish(&copied, 500)
	for _, l := range []*gopherpace.Limiter{own, per} {
		if d := l.Peek("192.0.2.7"); d.Remaining != 10 {
			t.Fatalf("the refund through a copy missed a bucket: %+v", d)
		}
	}
	if _, err := adapter.NewFlow(g, parsedHooks()); err == nil {
		t.Fatal("a flow without the further limit's key was accepted")
	}
	if _, err := adapter.NewFlow(g, adapter.Hooks[*parsed]{Also: h.Also}); err == nil {
		t.Fatal("a flow without Peer and Forwarded was accepted")
	}
}

// The admit path allocates nothing, whichever kind of peer.
func TestFlowDecideDoesNotAllocate(t *testing.T) {
	g := mustGate(t, newLimiter(t, 1_000_000_000, 1_000_000_000))
	hf := mustFlow(t, g, adapter.Hooks[*http.Request]{Peer: adapter.RequestPeer, Forwarded: adapter.RequestForwarded})
	pf := mustFlow(t, g, parsedHooks())
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	p := &parsed{addr: netip.MustParseAddr("2001:db8::1")}
	for _, addr := range []string{"192.0.2.1:80", "[2001:db8::1]:80"} {
		r.RemoteAddr = addr
		if n := testing.AllocsPerRun(100, func() {
			var req adapter.Request
			if hf.Decide(r, &req) != adapter.Admit {
				t.Fatal("denied")
			}
		}); n != 0 {
			t.Errorf("%s: %.0f allocations per request", addr, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		var req adapter.Request
		if pf.Decide(p, &req) != adapter.Admit {
			t.Fatal("denied")
		}
	}); n != 0 {
		t.Errorf("parsed peer: %.0f allocations per request", n)
	}
}

// AddrPeer parses TCP peers, IPv4 as four bytes whichever form net.IP
// holds, and names every other peer, never panicking on a nil one.
func TestAddrPeer(t *testing.T) {
	for _, tc := range []struct {
		in   net.Addr
		addr string
		name string
	}{
		{&net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}, "192.0.2.1", ""},
		{&net.TCPAddr{IP: net.IP{192, 0, 2, 1}, Port: 1}, "192.0.2.1", ""},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 1}, "2001:db8::1", ""},
		{&net.TCPAddr{Port: 5000}, "invalid IP", ":5000"},
		{(*net.TCPAddr)(nil), "invalid IP", "<nil>"},
		{&net.UnixAddr{Name: "/run/app.sock", Net: "unix"}, "invalid IP", "/run/app.sock"},
		{nil, "invalid IP", ""},
	} {
		addr, name := adapter.AddrPeer(tc.in)
		if addr.String() != tc.addr || name != tc.name || addr.Is4In6() {
			t.Errorf("AddrPeer(%#v) = %v, %q; want %s, %q", tc.in, addr, name, tc.addr, tc.name)
		}
	}
}
