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
	"errors"
	"net/http"
	"net/netip"
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

// Key is the bucket key for a client address: the IPv4 address, or the
// IPv6 /64 prefix that contains it.
func Key(addr netip.Addr) string {
	addr = addr.Unmap()
	if addr.Is6() {
		return netip.PrefixFrom(addr.WithZone(""), 64).Masked().String()
	}
	return addr.String()
}

// ParseHost parses "ip", "ip:port" or "[ipv6]:port", dropping any zone and
// unmapping IPv4-mapped IPv6 addresses.
func ParseHost(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

func contains(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
