// Package ginpace is Gin middleware for a gopherpace Limiter, standalone or
// clustered:
//
//	r.Use(ginpace.New(limiter))
//
// By default each client gets its own bucket, keyed by the connection's
// address (IPv6 grouped by /64). Forwarding fields are believed only from
// the proxies given to WithTrustedProxies, walked from the right, so a
// client cannot pick its own bucket by sending X-Forwarded-For; Gin's own
// SetTrustedProxies does not change the key.
//
// Responses carry the draft RateLimit-Policy and RateLimit fields; a
// denial sets Retry-After too, then aborts with 429 and a JSON body. The
// options and their defaults are those of every gopherpace adapter
// (docs/adapters.md).
package ginpace
