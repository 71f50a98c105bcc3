package clientip_test

import (
	"fmt"
	"net/http/httptest"
	"net/netip"

	"github.com/pedreviljoen/gopherpace/core/clientip"
)

// A client's bucket key: an IPv4 address as written, an IPv6 address's
// /64.
func ExampleKey() {
	fmt.Println(clientip.Key(netip.MustParseAddr("192.0.2.1")))
	fmt.Println(clientip.Key(netip.MustParseAddr("::ffff:192.0.2.1")))
	fmt.Println(clientip.Key(netip.MustParseAddr("2001:db8:1:2:3:4:5:6")))
	// Output:
	// 192.0.2.1
	// 192.0.2.1
	// 2001:db8:1:2::/64
}

// AppendKey writes the key into a buffer of the caller's, such as one on
// the stack, with another IPv6 grouping.
func ExampleAppendKey() {
	var buf [64]byte
	fmt.Printf("%s\n", clientip.AppendKey(buf[:0], netip.MustParseAddr("2001:db8:1:2:3:4:5:6"), 48))
	// Output: 2001:db8:1::/48
}

// Behind a trusted proxy, the forwarding fields name the client; from any
// other peer they are ignored.
func ExampleFromRequest() {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Forwarded-For", "198.51.100.7, 10.0.0.2")
	for _, peer := range []string{"10.0.0.1:5000", "203.0.113.9:5000"} {
		r.RemoteAddr = peer
		addr, err := clientip.FromRequest(r, trusted)
		fmt.Println(peer, "->", addr, err)
	}
	// Output:
	// 10.0.0.1:5000 -> 198.51.100.7 <nil>
	// 203.0.113.9:5000 -> 203.0.113.9 <nil>
}

// A Config's key for a peer and its request's forwarding fields.
func ExampleConfig_AppendKey() {
	c := clientip.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, IPv6Prefix: 56}
	key, err := c.AppendKey(nil, "10.0.0.1:5000", []string{"2001:db8:1:2:3:4:5:6"}, "")
	fmt.Printf("%s %v %d\n", key, err, c.Prefix6())
	_, err = c.AppendKey(nil, "@unix-socket", nil, "")
	fmt.Println(err)
	// Output:
	// 2001:db8:1::/56 <nil> 56
	// clientip: request has no client IP address
}
