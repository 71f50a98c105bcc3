// Package fiberpace is Fiber v2 middleware for a gopherpace Limiter,
// standalone or clustered, with a Config that mirrors Fiber's own limiter
// middleware (Next, KeyGenerator, LimitReached, SkipFailedRequests,
// SkipSuccessfulRequests) so that switching is a small change.
//
//	h, err := fiberpace.New(limiter)
//	if err != nil { ... }
//	app.Use(h)
//
// By default each client gets its own bucket, keyed by c.IP(): the
// connection's address unless the app sets ProxyHeader. If it does, also set
// EnableTrustedProxyCheck and TrustedProxies, or any client can name its
// own bucket.
//
// fasthttp reuses request buffers once a handler returns. The limiter keeps
// only a 64-bit hash of each key, never the string; with SkipFailedRequests
// or SkipSuccessfulRequests the key is copied, because it is needed again
// after the handler has run.
package fiberpace
