// Package serviceclient calls gopherpace serve's HTTP API (/allow) from Go
// with what a call site on the request path needs: a timeout (200 ms by
// default), so that a slow limiter cannot make the caller slow; an
// explicit choice, per call, of what to answer when the service cannot
// (FailOpen lets the work go on, FailClosed stops it); and a local cache
// of "denied until T" per key, so that a caller flooding a key it was
// refused costs no round trip until the refusal's Retry-After has passed.
//
//	c, _ := serviceclient.New("http://gopherpace:8100")
//	if r := c.Allow(ctx, tenant, 1, serviceclient.FailOpen); !r.Allowed {
//		http.Error(w, "slow down", http.StatusTooManyRequests)
//		return
//	}
//
// It depends on the standard library only. Envoy and gRPC callers use the
// RateLimitService instead (docs/service.md).
package serviceclient
