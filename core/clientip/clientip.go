// Package clientip works out which client sent a request, for rate-limit
// keys: the connection's address, or, behind proxies you trust, the address
// they forwarded. Every gopherpace adapter uses it, so a client cannot pick
// its own bucket by sending a header in any of them.
//
// Forwarded addresses are read only when the direct peer is a trusted
// proxy, and X-Forwarded-For is walked from right to left: the first
// address that is not a trusted proxy is the client. A client that prepends
// its own entries only adds to the left of the list, where the walk never
// reaches. IPv6 clients are grouped by /64, the block one host or site
// usually gets, so that one host cannot rotate through addresses.
package clientip

import (
	"encoding/binary"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// ErrNoClientIP is returned when a request's peer address is not an IP
// address (for example a Unix socket peer).
var ErrNoClientIP = errors.New("clientip: request has no client IP address")

// FromRequest returns the address of the client that sent r, trusting its
// X-Forwarded-For and X-Real-IP fields only when r.RemoteAddr is inside one
// of trusted (see Resolve).
func FromRequest(r *http.Request, trusted []netip.Prefix) (netip.Addr, error) {
	peer, ok := ParseHost(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, ErrNoClientIP
	}
	if !contains(trusted, peer) {
		return peer, nil
	}
	return Resolve(peer, trusted, r.Header.Values("X-Forwarded-For"), r.Header.Get("X-Real-IP")), nil
}

// Resolve returns the client's address given the direct peer's address and
// the forwarding fields of its request. An untrusted peer is the client
// and its fields are never read. For a trusted peer, forwardedFor (every
// X-Forwarded-For field, in order) is walked from right to left and the
// first address outside trusted is the client; when every entry is
// trusted, the leftmost is. An entry that does not parse stops the walk at
// the last good hop. Without X-Forwarded-For, a trusted peer's realIP
// (X-Real-IP) is used.
func Resolve(peer netip.Addr, trusted []netip.Prefix, forwardedFor []string, realIP string) netip.Addr {
	peer = peer.Unmap().WithZone("")
	if !contains(trusted, peer) {
		return peer
	}
	if len(forwardedFor) > 0 {
		client := peer
		for i := len(forwardedFor) - 1; i >= 0; i-- {
			list := forwardedFor[i]
			for list != "" {
				var item string
				if j := strings.LastIndexByte(list, ','); j >= 0 {
					item, list = list[j+1:], list[:j]
				} else {
					item, list = list, ""
				}
				addr, ok := ParseHost(strings.TrimSpace(item))
				if !ok {
					return client
				}
				client = addr
				if !contains(trusted, addr) {
					return addr
				}
			}
		}
		return client
	}
	if real, ok := ParseHost(strings.TrimSpace(realIP)); ok {
		return real
	}
	return peer
}

// DefaultIPv6Prefix is how many leading bits of an IPv6 address name one
// client: a /64, the block one host or site usually gets.
const DefaultIPv6Prefix = 64

// Key is the bucket key for a client address: the IPv4 address, or the
// IPv6 /64 prefix that contains it.
func Key(addr netip.Addr) string { return string(AppendKey(nil, addr, DefaultIPv6Prefix)) }

// AppendKey appends the bucket key for addr to dst: the IPv4 address, or
// the IPv6 prefix of v6Bits bits that contains it ("2001:db8:1:2::/64").
// Keys fit a 64-byte buffer, so middleware can build them on the stack:
// a limiter keeps only a hash of a key, never the string.
func AppendKey(dst []byte, addr netip.Addr, v6Bits int) []byte {
	addr = addr.Unmap()
	if addr.Is4() {
		return appendIPv4(dst, addr.As4())
	}
	addr = addr.WithZone("")
	if addr.Is6() {
		p, err := addr.Prefix(v6Bits)
		if err != nil {
			p = netip.PrefixFrom(addr, 128)
		}
		return p.AppendTo(dst)
	}
	return addr.AppendTo(dst)
}

// Config is where client addresses come from: the proxies whose forwarding
// fields are trusted, and how IPv6 addresses group into clients. The zero
// Config trusts no proxy and groups IPv6 by /64.
type Config struct {
	// TrustedProxies are the networks of the proxies whose forwarding
	// fields (X-Forwarded-For, X-Real-IP) name the client. Empty: the
	// connection's peer is the client, whatever the fields say.
	TrustedProxies []netip.Prefix
	// IPv6Prefix is how many leading bits name one IPv6 client; 0 means
	// DefaultIPv6Prefix. Between 1 and 128.
	IPv6Prefix int
}

// Check reports an invalid Config: a prefix length out of range, or a
// trusted network that is not valid.
func (c Config) Check() error {
	if c.IPv6Prefix < 0 || c.IPv6Prefix > 128 {
		return errors.New("clientip: IPv6 prefix must be between 1 and 128 bits")
	}
	for _, p := range c.TrustedProxies {
		if !p.IsValid() {
			return errors.New("clientip: invalid trusted proxy network")
		}
	}
	return nil
}

// AppendKey appends the bucket key of the client behind peer (the
// connection's address, as "ip:port" or "ip"), given its request's
// forwarding fields; it fails with ErrNoClientIP when peer is not an IP.
func (c Config) AppendKey(dst []byte, peer string, forwardedFor []string, realIP string) ([]byte, error) {
	addr, ok := ParseHost(peer)
	if !ok {
		return dst, ErrNoClientIP
	}
	return c.AppendKeyAddr(dst, addr, forwardedFor, realIP), nil
}

// Trusts reports whether peer is one of the trusted proxies, whose
// forwarding fields name the client: a framework need not read the fields
// of other peers.
func (c Config) Trusts(peer netip.Addr) bool {
	return len(c.TrustedProxies) > 0 && contains(c.TrustedProxies, peer.Unmap().WithZone(""))
}

// AppendKeyAddr is AppendKey for a peer address already parsed.
func (c Config) AppendKeyAddr(dst []byte, addr netip.Addr, forwardedFor []string, realIP string) []byte {
	if len(c.TrustedProxies) > 0 {
		addr = Resolve(addr, c.TrustedProxies, forwardedFor, realIP)
	}
	return AppendKey(dst, addr, c.Prefix6())
}

// Prefix6 is how many leading bits name one IPv6 client: IPv6Prefix, or
// DefaultIPv6Prefix for 0.
func (c Config) Prefix6() int {
	if c.IPv6Prefix == 0 {
		return DefaultIPv6Prefix
	}
	return c.IPv6Prefix
}

// ParseHost parses "ip", "ip:port" or "[ipv6]:port", dropping any zone and
// unmapping IPv4-mapped IPv6 addresses. The port is not checked: only the
// address names a client.
func ParseHost(s string) (netip.Addr, bool) {
	host := s
	switch last := strings.LastIndexByte(s, ':'); {
	case s == "":
		return netip.Addr{}, false
	case s[0] == '[':
		end := strings.LastIndexByte(s, ']')
		if end < 0 || end != len(s)-1 && end != last-1 {
			return netip.Addr{}, false
		}
		host = s[1:end]
	case last >= 0 && strings.IndexByte(s, ':') == last:
		host = s[:last] // one colon: "ipv4:port"
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// IPv4Host is the IPv4 address of "ip" or "ip:port" when it is written as
// Go writes one (four decimal fields, no leading zeros): then it is its
// own key (AppendKey would write the same bytes), and the caller needs
// neither to parse nor to copy it. Anything else is not ok, and goes the
// way of ParseHost.
func IPv4Host(s string) (host string, ok bool) {
	// Each field's digits are read and bounded as they come, with no
	// second pass: the request path pays this for every request, and a
	// pass that classified bytes first cost twice as much.
	n, i := len(s), 0
	for field := 0; ; field++ {
		if i >= n || s[i]-'0' > 9 {
			return "", false
		}
		d0 := s[i] - '0'
		i++
		if i < n && s[i]-'0' <= 9 {
			if d0 == 0 { // a leading zero
				return "", false
			}
			d1 := s[i] - '0'
			i++
			if i < n && s[i]-'0' <= 9 {
				if d2 := s[i] - '0'; d0 > 2 || d0 == 2 && (d1 > 5 || d1 == 5 && d2 > 5) {
					return "", false
				}
				i++
			}
		}
		if field == 3 {
			break
		}
		if i >= n || s[i] != '.' {
			return "", false
		}
		i++
	}
	// The port, if any: no second ':' (not "ip:port"). A loop, not
	// IndexByte: for five bytes the call costs more than the search.
	if i < n {
		if s[i] != ':' {
			return "", false
		}
		for j := i + 1; j < n; j++ {
			if s[j] == ':' {
				return "", false
			}
		}
	}
	return s[:i], true
}

func contains(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// appendIPv4 writes a as netip does ("192.0.2.1"): the key of most
// requests, so it is written a word per byte from a table rather than
// digit by digit.
func appendIPv4(dst []byte, a [4]byte) []byte {
	l := len(dst)
	dst = slices.Grow(dst, 16)
	b := dst[l : l+16]
	n := 0
	for _, v := range a {
		e := octets[v]
		binary.LittleEndian.PutUint32(b[n&15:], uint32(e))
		n += int(e >> 32)
	}
	return dst[:l+n-1]
}

// octets are each byte's decimal digits and a '.', in the low four bytes,
// and how many of them there are, above.
var octets = func() (t [256]uint64) {
	for v := range t {
		s := strconv.Itoa(v) + "."
		var w uint64
		for i := len(s) - 1; i >= 0; i-- {
			w = w<<8 | uint64(s[i])
		}
		t[v] = w | uint64(len(s))<<32
	}
	return t
}()
