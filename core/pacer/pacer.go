// Package pacer slows a Go program down to the rate limits of the HTTP
// APIs it calls. Its Transport, an http.RoundTripper, turns a 429 into a
// wait: it reads how long the server asks the client to wait (Retry-After,
// or the reset of the draft RateLimit field), waits that long, bounded,
// and sends the request again; and it holds later requests to the same
// host until then, so the program sends nothing it knows will be refused.
// A request it may not repeat (one whose method is not idempotent, unless
// asked) gets the 429 back, and later ones still wait.
//
//	client := &http.Client{Transport: &pacer.Transport{}}
package pacer

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Defaults of a Transport's zero fields.
const (
	DefaultMaxWait    = 30 * time.Second
	DefaultMaxRetries = 3
)

// Transport is an http.RoundTripper that waits out rate limits. Its zero
// value is ready to use; it is safe for concurrent use.
type Transport struct {
	// Base sends the requests; nil is http.DefaultTransport.
	Base http.RoundTripper
	// MaxWait is the longest it waits, for one answer or one host: a
	// server that asks for more gets its answer returned. 0 is
	// DefaultMaxWait.
	MaxWait time.Duration
	// MaxRetries is how many times one request is sent again after a 429
	// (or a 503 that says when to come back). 0 is DefaultMaxRetries; a
	// negative number sends nothing again, and only holds later requests.
	MaxRetries int
	// RetryNonIdempotent sends again requests whose method is not
	// idempotent (POST, PATCH) after a 429, when their body can be read
	// again (http.NewRequest sets GetBody for common bodies). Off by
	// default: a server may have acted on such a request even while
	// answering 429.
	RetryNonIdempotent bool

	pauses Pauses // by host
}

// RoundTrip sends req, waiting first while its host asked for a pause, and
// sends it again after a 429 that says when to, as the fields allow.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	host := req.URL.Host
	if err := t.pauses.Wait(ctx, host, t.maxWait()); err != nil {
		return nil, err
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	retries := t.MaxRetries
	if retries == 0 {
		retries = DefaultMaxRetries
	}
	for attempt := 0; ; attempt++ {
		resp, err := base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		wait, limited := pauseOf(resp, time.Now())
		if wait > 0 {
			t.pauses.Hold(host, time.Now().Add(wait))
		}
		if !limited || attempt >= retries || wait > t.maxWait() || !t.repeatable(req) {
			return resp, nil
		}
		next, err := again(req)
		if err != nil {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
		req = next
	}
}

func (t *Transport) maxWait() time.Duration {
	if t.MaxWait > 0 {
		return t.MaxWait
	}
	return DefaultMaxWait
}

// repeatable reports whether req may be sent again.
func (t *Transport) repeatable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	}
	return t.RetryNonIdempotent && (req.Body == nil || req.Body == http.NoBody || req.GetBody != nil)
}

// again is a copy of req to send again, with its body read anew.
func again(req *http.Request) (*http.Request, error) {
	next := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, errors.New("pacer: the body cannot be read again")
		}
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		next.Body = body
	}
	return next, nil
}

// pauseOf reads how long resp asks the client to wait before its next
// request, and whether it refused this one for a rate limit: a 429, or a
// 503 that says when to come back. An answer that let the request through
// but left nothing (the RateLimit field's r=0) asks for a pause too.
func pauseOf(resp *http.Response, now time.Time) (time.Duration, bool) {
	h := resp.Header
	limited := resp.StatusCode == http.StatusTooManyRequests
	wait, told := retryAfter(h.Get("Retry-After"), now)
	if !told {
		if r, t, ok := draftRateLimit(h.Values("RateLimit")); ok && (r == 0 || limited) {
			wait, told = t, true
		} else if t, ok := legacyReset(h, now); ok && (limited || strings.TrimSpace(h.Get("X-RateLimit-Remaining")) == "0") {
			wait, told = t, true
		}
	}
	if resp.StatusCode == http.StatusServiceUnavailable && told {
		limited = true
	}
	if !told {
		return 0, false // refused, but with no word of when to come back
	}
	return max(wait, 0), limited
}

// retryAfter reads a Retry-After field: delay-seconds, or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(min(n, int64(24*time.Hour/time.Second))) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return at.Sub(now), true
	}
	return 0, false
}

// draftRateLimit reads the IETF httpapi draft's RateLimit field
// (`"default";r=0;t=3`): the least remaining r of its items, and the
// reset t (seconds) of that item.
func draftRateLimit(values []string) (remaining int64, reset time.Duration, ok bool) {
	remaining = -1
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			var r, t int64 = -1, -1
			for _, param := range strings.Split(item, ";")[1:] {
				k, val, _ := strings.Cut(strings.TrimSpace(param), "=")
				n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
				if err != nil || n < 0 {
					continue
				}
				switch k {
				case "r":
					r = n
				case "t":
					t = n
				}
			}
			if r >= 0 && t >= 0 && (remaining < 0 || r < remaining) {
				remaining, reset, ok = r, time.Duration(min(t, int64(24*time.Hour/time.Second)))*time.Second, true
			}
		}
	}
	return remaining, reset, ok
}

// legacyReset reads X-RateLimit-Reset: seconds to wait, or a Unix time
// when it is larger than a day in seconds.
func legacyReset(h http.Header, now time.Time) (time.Duration, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(h.Get("X-RateLimit-Reset")), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	if n > 86400 {
		return time.Unix(n, 0).Sub(now), true
	}
	return time.Duration(n) * time.Second, true
}
