// Package echopace is Echo v4 middleware for a gopherpace Limiter, standalone
// or clustered, used as Echo's own RateLimiter is:
//
//	e.Use(echopace.RateLimiter(limiter))
//
// By default each client gets its own bucket, keyed by the connection's
// address (IPv6 grouped by /64). Forwarding fields are believed only from
// the proxies given to WithTrustedProxies, walked from the right, so a
// client cannot pick its own bucket by sending X-Forwarded-For; Echo's
// IPExtractor does not change the key.
//
// Responses carry the draft RateLimit-Policy and RateLimit fields. A
// denial sets Retry-After too and returns ErrRateLimitExceeded, an
// *echo.HTTPError with code 429, so the application's HTTPErrorHandler
// renders it. The options and their defaults are those of every gopherpace
// adapter (docs/adapters.md).
//
// NewStore adapts a Limiter to Echo's own middleware.RateLimiter as a
// drop-in RateLimiterStore (without fields or costs, which that interface
// cannot carry).
//
// For Echo v5 (github.com/labstack/echo/v5) use the echo5pace module.
package echopace
