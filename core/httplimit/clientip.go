package httplimit

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
)

// ErrNoClientIP is returned when a request's RemoteAddr is not an IP
// address (for example a Unix socket peer).
var ErrNoClientIP = errors.New("httplimit: request has no client IP address")

// ClientIP returns the address of the client that sent r.
//
// When the direct peer (r.RemoteAddr) is inside one of trusted, the
// X-Forwarded-For entries are walked from right to left and the first
// address outside trusted is the client; when every entry is trusted the
// leftmost one is. Without X-Forwarded-For, a trusted peer's X-Real-IP is
// used. An entry that does not parse stops the walk at the last good hop.
// An untrusted peer's headers are never read.
func ClientIP(r *http.Request, trusted []netip.Prefix) (netip.Addr, error) {
	peer, ok := parseHost(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, ErrNoClientIP
	}
	if !contains(trusted, peer) {
		return peer, nil
	}
	if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
		client := peer
		for i := len(xff) - 1; i >= 0; i-- {
			list := xff[i]
			for list != "" {
				var item string
				if j := strings.LastIndexByte(list, ','); j >= 0 {
					item, list = list[j+1:], list[:j]
				} else {
					item, list = list, ""
				}
				addr, ok := parseHost(strings.TrimSpace(item))
				if !ok {
					return client, nil
				}
				client = addr
				if !contains(trusted, addr) {
					return addr, nil
				}
			}
		}
		return client, nil
	}
	if real, ok := parseHost(strings.TrimSpace(r.Header.Get("X-Real-IP"))); ok {
		return real, nil
	}
	return peer, nil
}

// IPKey is the bucket key for a client address: the IPv4 address, or the
// IPv6 /64 prefix that contains it.
func IPKey(addr netip.Addr) string {
	addr = addr.Unmap()
	if addr.Is6() {
		return netip.PrefixFrom(addr.WithZone(""), 64).Masked().String()
	}
	return addr.String()
}

// parseHost parses "ip", "ip:port" or "[ipv6]:port", dropping any zone.
func parseHost(s string) (netip.Addr, bool) {
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
