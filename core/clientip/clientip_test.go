package clientip

import (
	"math/rand/v2"
	"net/http"
	"net/netip"
	"testing"
)

func TestFromRequest(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, tc := range []struct {
		name   string
		remote string
		xff    []string
		realIP string
		want   string
	}{
		{"untrusted peer, spoofed XFF ignored", "203.0.113.9:5000", []string{"1.2.3.4"}, "", "203.0.113.9"},
		{"untrusted peer, spoofed X-Real-IP ignored", "203.0.113.9:5000", nil, "1.2.3.4", "203.0.113.9"},
		{"trusted proxy, client from XFF", "10.0.0.2:80", []string{"198.51.100.7"}, "", "198.51.100.7"},
		{"rightmost untrusted hop wins over a spoofed left entry", "10.0.0.2:80", []string{"6.6.6.6, 198.51.100.7, 10.1.1.1"}, "", "198.51.100.7"},
		{"several XFF headers read as one list", "10.0.0.2:80", []string{"6.6.6.6", "198.51.100.7, 10.9.9.9"}, "", "198.51.100.7"},
		{"all hops trusted: leftmost", "10.0.0.2:80", []string{"10.3.3.3, 10.4.4.4"}, "", "10.3.3.3"},
		{"garbage hop stops at the last good one", "10.0.0.2:80", []string{"6.6.6.6, junk, 10.5.5.5"}, "", "10.5.5.5"},
		{"trusted proxy, X-Real-IP", "10.0.0.2:80", nil, "198.51.100.8", "198.51.100.8"},
		{"XFF entries with ports", "10.0.0.2:80", []string{"[2001:db8::1]:443"}, "", "2001:db8::1"},
		{"IPv6 peer with zone", "[fe80::1%eth0]:80", nil, "", "fe80::1"},
		{"IPv4-mapped peer", "[::ffff:203.0.113.1]:80", nil, "", "203.0.113.1"},
		{"trusted v6 proxy", "[fd00::5]:80", []string{"2001:db8::77"}, "", "2001:db8::77"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tc.remote, Header: http.Header{}}
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if tc.realIP != "" {
				r.Header.Set("X-Real-IP", tc.realIP)
			}
			got, err := FromRequest(r, trusted)
			if err != nil || got.String() != tc.want {
				t.Fatalf("FromRequest = %v, %v; want %s", got, err, tc.want)
			}
		})
	}
	if _, err := FromRequest(&http.Request{RemoteAddr: "@"}, nil); err != ErrNoClientIP {
		t.Fatalf("unix-socket peer: %v, want ErrNoClientIP", err)
	}
}

func TestKeyGroupsIPv6By64(t *testing.T) {
	a := Key(netip.MustParseAddr("2001:db8:1:2:aaaa::1"))
	b := Key(netip.MustParseAddr("2001:db8:1:2:bbbb::9"))
	c := Key(netip.MustParseAddr("2001:db8:1:3::1"))
	if a != b || a == c || a != "2001:db8:1:2::/64" {
		t.Fatalf("IPv6 keys %q %q %q", a, b, c)
	}
	if k := Key(netip.MustParseAddr("::ffff:192.0.2.1")); k != "192.0.2.1" {
		t.Fatalf("mapped IPv4 key %q", k)
	}
}

func TestParseHost(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1":             "192.0.2.1",
		"192.0.2.1:8080":        "192.0.2.1",
		"[2001:db8::1]:443":     "2001:db8::1",
		"[2001:db8::1]":         "2001:db8::1",
		"2001:db8::1":           "2001:db8::1",
		"[fe80::1%eth0]:80":     "fe80::1",
		"::ffff:192.0.2.9":      "192.0.2.9",
		"[::ffff:192.0.2.9]:1":  "192.0.2.9",
		"":                      "",
		"@":                     "",
		"[2001:db8::1":          "",
		"[2001:db8::1]x":        "",
		"[2001:db8::1]:80:90":   "",
		"example.com:80":        "",
		"192.0.2.1:80:90":       "",
		"[192.0.2.1]:80":        "192.0.2.1",
		" 192.0.2.1":            "",
		"1.2.3.4.5":             "",
		"2001:db8::1%eth0":      "2001:db8::1",
		"[2001:db8::1]:notport": "2001:db8::1",
	} {
		got, ok := ParseHost(in)
		if !ok && want != "" || ok && got.String() != want {
			t.Errorf("ParseHost(%q) = %v, %v; want %q", in, got, ok, want)
		}
	}
}

// ParseHost agrees with the standard library on every input the standard
// library accepts, and never accepts what is not an address with, at most,
// something after it that only a port could be.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"192.0.2.1:80", "[::1]:443", "::1", "fe80::1%eth0", "[", "1.2.3.4:", ":80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := ParseHost(s)
		if ap, err := netip.ParseAddrPort(s); err == nil {
			if want := ap.Addr().Unmap().WithZone(""); !ok || got != want {
				t.Fatalf("ParseHost(%q) = %v, %v; ParseAddrPort says %v", s, got, ok, want)
			}
		}
		if a, err := netip.ParseAddr(s); err == nil {
			if want := a.Unmap().WithZone(""); !ok || got != want {
				t.Fatalf("ParseHost(%q) = %v, %v; ParseAddr says %v", s, got, ok, want)
			}
		}
		if ok && (!got.IsValid() || got.Zone() != "" || got.Is4In6()) {
			t.Fatalf("ParseHost(%q) = %v: not a plain address", s, got)
		}
	})
}

// An address IPv4Host takes as its own key is the key AppendKey writes
// for what ParseHost reads, so that the shortcut can never split or merge
// clients; and every IPv4 address net/http reports takes the shortcut.
func FuzzIPv4Host(f *testing.F) {
	for _, s := range []string{"192.0.2.1:80", "192.0.2.1", "01.2.3.4:1", "1.2.3.4:5:6", "1.2.3.256:1", "1.2.3:4", "1.2.3.4.5", "[::1]:1", "1.2.3.4:", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		host, ok := IPv4Host(s)
		addr, parsed := ParseHost(s)
		if ok {
			if !parsed || !addr.Is4() {
				t.Fatalf("IPv4Host(%q) = %q, but ParseHost says %v, %v", s, host, addr, parsed)
			}
			if key := string(AppendKey(nil, addr, DefaultIPv6Prefix)); key != host {
				t.Fatalf("IPv4Host(%q) = %q, but the key is %q", s, host, key)
			}
		}
		if len(s) >= 4 {
			a := netip.AddrFrom4([4]byte{s[0], s[1], s[2], s[3]})
			hp := netip.AddrPortFrom(a, 1234).String()
			if host, ok := IPv4Host(hp); !ok || host != a.String() {
				t.Fatalf("IPv4Host(%q) = %q, %v; want %q", hp, host, ok, a)
			}
		}
	})
}

// An IPv4 key is the address as netip writes it, mapped into IPv6 or not,
// appended after whatever dst holds, whatever dst's capacity: every value
// of every byte, and random addresses besides.
func TestIPv4KeyIsTheAddressAsNetipWritesIt(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(a [4]byte) {
		addr := netip.AddrFrom4(a)
		want := addr.String()
		for _, in := range []netip.Addr{addr, netip.AddrFrom16(addr.As16())} {
			if got := string(AppendKey(nil, in, DefaultIPv6Prefix)); got != want {
				t.Fatalf("AppendKey(nil, %v) = %q, want %q", in, got, want)
			}
			dst := make([]byte, 3, 3+rng.IntN(20))
			copy(dst, "ab:")
			if got := string(AppendKey(dst, in, DefaultIPv6Prefix)); got != "ab:"+want {
				t.Fatalf("AppendKey(%q, %v) = %q, want %q", dst, in, got, "ab:"+want)
			}
		}
	}
	for pos := range 4 {
		for v := range 256 {
			a := [4]byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}
			a[pos] = byte(v)
			check(a)
		}
	}
	for range 10_000 {
		u := rng.Uint32()
		check([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)})
	}
}
