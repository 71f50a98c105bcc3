// Package gopherpace is cluster-wide rate limiting with no central store.
//
// A Limiter enforces a refill rate and a bucket size with GCRA token buckets
// kept in integer nanoseconds: one atomic word per bucket, a compare-and-swap
// per decision, no allocation, and every rounding admitting less rather than
// more. It applies its rule to one global bucket (key "") and to one bucket
// per key (client IP, API key, tenant...), with per-key overrides and a hard
// cap on live keys so that a flood of random keys holds memory still.
//
// Standalone, a Limiter is an in-process limiter like golang.org/x/time/rate,
// only faster. Given a transport, every replica of a service enforces the
// same cluster-wide limit and tells its peers what it admitted.
//
// Time is explicit: every decision has an ...At form taking the current
// time, so tests never sleep.
//
//	limiter, err := gopherpace.New(gopherpace.WithRefillRate(100))
//	if err != nil { ... }
//	defer limiter.Close()
//	http.ListenAndServe(":8080", limiter.Wrap(mux))
//
// The httplimit subpackage has configurable net/http middleware; adapters
// for Gin, Echo, Fiber and gRPC live in their own modules.
package gopherpace
