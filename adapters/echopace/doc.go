// Package echopace is Echo middleware for a gopherpace Limiter, standalone
// or clustered, in Echo's own idiom: RateLimiter and RateLimiterWithConfig,
// with Skipper, BeforeFunc, IdentifierExtractor, DenyHandler and
// ErrorHandler.
//
//	e.Use(echopace.RateLimiter(limiter))
//
// By default each client gets its own bucket, keyed by c.RealIP(). Since
// Echo v4.16.3 RealIP returns the connection's address unless e.IPExtractor
// is set; set it (echo.ExtractIPFromXFFHeader with your proxies' ranges)
// when clients come through a load balancer.
//
// A denial sets Retry-After and the rate-limit headers and returns an
// *echo.HTTPError with code 429, so the application's HTTPErrorHandler
// renders it.
//
// NewStore adapts a Limiter to Echo's own middleware.RateLimiter as a
// drop-in RateLimiterStore (without headers or costs, which that interface
// cannot carry).
package echopace
