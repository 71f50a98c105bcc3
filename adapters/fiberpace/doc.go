// Package fiberpace is Fiber v2 middleware for a gopherpace Limiter,
// standalone or clustered, used as Fiber's own limiter is:
//
//	app.Use(fiberpace.New(limiter))
//
// By default each client gets its own bucket, keyed by the connection's
// address (IPv6 grouped by /64). Behind a load balancer, name it:
//
//	app.Use(fiberpace.New(limiter, fiberpace.WithTrustedProxies(netip.MustParsePrefix("10.0.0.0/8"))))
//
// Forwarding fields are then believed from those proxies only, and
// X-Forwarded-For is walked from the right, so a client that sends its own
// X-Forwarded-For cannot pick its bucket. Fiber's ProxyHeader and c.IP()
// are not used: c.IP() takes the leftmost address, which the client
// writes.
//
// Responses carry the draft RateLimit-Policy and RateLimit fields; a
// denial sets Retry-After too and answers 429. The options and their
// defaults are those of every gopherpace adapter (docs/adapters.md).
//
// fasthttp reuses request buffers once a handler returns. The limiter keeps
// only a 64-bit hash of each key, never the string; with WithRefund a key
// from WithKeyFunc is copied, because it is needed again after the handler
// has run.
//
// For Fiber v3 (github.com/gofiber/fiber/v3) use the fiber3pace module.
package fiberpace
