// Package ginpace is Gin middleware for a gopherpace Limiter, standalone or
// clustered.
//
//	mw, err := ginpace.New(limiter)
//	if err != nil { ... }
//	r.Use(mw)
//
// By default every client IP gets its own bucket, keyed by c.ClientIP().
// Gin trusts X-Forwarded-For from every peer unless told otherwise, so a
// client could pick its own bucket by sending the header. Call
// engine.SetTrustedProxies with your load balancers' addresses, or
// SetTrustedProxies(nil) when clients connect directly.
//
// A denial sets Retry-After and the rate-limit headers, then aborts with
// 429 and a JSON body.
package ginpace
