// Package rlsclient asks a RateLimitService (gopherpace serve, or
// envoyproxy/ratelimit) from Go over gRPC, with what a call site on the
// request path needs: a timeout (200 ms by default), an explicit choice,
// per call, of what to answer when the service cannot (FailOpen or
// FailClosed), and a local cache of "over the limit until T" per request,
// so that a caller flooding a descriptor it was refused costs no round
// trip while the refusal's reset has not passed.
//
//	c := rlsclient.New(conn, "edge")
//	if r := c.Check(ctx, rlsclient.FailOpen, rlsclient.Descriptor("remote_address", ip)); !r.Allowed {
//		http.Error(w, "slow down", http.StatusTooManyRequests)
//		return
//	}
//
// Programs in other languages, and Envoy, ask the same service directly;
// for the HTTP API (/allow), use the serviceclient module.
package rlsclient

import (
	"context"
	"errors"
	"strings"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/pedreviljoen/gopherpace/core/pacer"
	"google.golang.org/grpc"
)

// A FailMode is what a call answers when the service does not: it timed
// out, could not be reached, or refused the request. There is no
// default: each call site says which.
type FailMode uint8

const (
	// FailClosed denies: the limit protects something that must not be
	// overrun, and the limiter's outage stops the work.
	FailClosed FailMode = iota + 1
	// FailOpen allows: the limiter's outage must not become the caller's.
	FailOpen
)

// DefaultTimeout bounds a call.
const DefaultTimeout = 200 * time.Millisecond

// A Result is one call's answer.
type Result struct {
	// Allowed says whether the work may go on: the service's overall
	// answer, or, when Err is set, the FailMode's.
	Allowed bool
	// Response is the service's answer; nil when cached or failed.
	Response *rlspb.RateLimitResponse
	// RetryAfter is, on a denial, how long until the descriptors reset,
	// from the status that denied (its duration_until_reset).
	RetryAfter time.Duration
	// Cached says the denial came from the local cache: no round trip.
	Cached bool
	// Err is why the service gave no answer; nil when it did.
	Err error
}

// Client asks one RateLimitService domain. It is safe for concurrent use.
type Client struct {
	rls     rlspb.RateLimitServiceClient
	domain  string
	timeout time.Duration

	// denied holds, by request, when a refused request may pass again
	// (at most pacer.MaxPausedTargets requests); shared with the clients
	// WithTimeout derives.
	denied *pacer.Pauses
}

// New returns a client of the domain's limits over conn, with
// DefaultTimeout.
func New(conn grpc.ClientConnInterface, domain string) *Client {
	return &Client{rls: rlspb.NewRateLimitServiceClient(conn), domain: domain, timeout: DefaultTimeout, denied: &pacer.Pauses{}}
}

// WithTimeout returns a client like c with another timeout (1 ms or more),
// sharing c's cache.
func (c *Client) WithTimeout(d time.Duration) *Client {
	return &Client{rls: c.rls, domain: c.domain, timeout: max(d, time.Millisecond), denied: c.denied}
}

// Descriptor is a descriptor of key, value pairs:
// Descriptor("remote_address", ip, "path", "/login").
func Descriptor(kv ...string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// Check asks whether the descriptors may pass, spending one hit of each.
// A request refused before, whose reset has not passed, is refused from
// the local cache without a call. When the service gives no answer in
// time, mode decides, and Err says why.
func (c *Client) Check(ctx context.Context, mode FailMode, descriptors ...*rlv3.RateLimitDescriptor) Result {
	if mode != FailOpen && mode != FailClosed {
		return Result{Err: errors.New("rlsclient: no FailMode given: say FailOpen or FailClosed")}
	}
	key := c.cacheKey(descriptors)
	now := time.Now()
	until, cached := c.denied.Until(key)
	if cached {
		return Result{RetryAfter: until.Sub(now), Cached: true}
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.rls.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: c.domain, Descriptors: descriptors})
	if err != nil {
		return Result{Allowed: mode == FailOpen, Err: err}
	}
	if resp.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT {
		return Result{Allowed: true, Response: resp}
	}
	var wait time.Duration
	for _, st := range resp.Statuses {
		if st.Code == rlspb.RateLimitResponse_OVER_LIMIT && st.DurationUntilReset != nil {
			wait = max(wait, st.DurationUntilReset.AsDuration())
		}
	}
	if wait > 0 {
		c.denied.Hold(key, now.Add(wait))
	}
	return Result{Response: resp, RetryAfter: wait}
}

// cacheKey names a request's descriptors for the cache.
func (c *Client) cacheKey(ds []*rlv3.RateLimitDescriptor) string {
	var b strings.Builder
	for _, d := range ds {
		for _, e := range d.Entries {
			b.WriteString(e.Key)
			b.WriteByte(0)
			b.WriteString(e.Value)
			b.WriteByte(0)
		}
		b.WriteByte(1)
	}
	return b.String()
}
