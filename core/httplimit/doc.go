// Package httplimit is configurable net/http middleware for a gopherpace
// Limiter: which bucket a request spends from (global, client IP, a header,
// or any function), how many tokens it costs, which requests skip the
// limiter, and how denials and errors are answered.
//
// Client IPs are taken from X-Forwarded-For or X-Real-IP only when the
// direct peer is one of the trusted proxies you configure; otherwise the
// connection's address is the key, so a client cannot pick its own bucket by
// sending a header. IPv6 clients are grouped by /64, the block one host or
// site usually gets, so that one host cannot rotate through addresses.
//
// The package imports only the standard library and the core.
package httplimit
