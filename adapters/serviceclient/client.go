package serviceclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// A FailMode is what a call answers when the service does not: it timed
// out, refused the connection, or answered something else than /allow's
// 200 or 429. There is no default: each call site says which.
type FailMode uint8

const (
	// FailClosed denies: the limiter protects a backend that must not be
	// overrun, and its outage stops the work.
	FailClosed FailMode = iota + 1
	// FailOpen allows: the limiter's outage must not become the caller's.
	FailOpen
)

// DefaultTimeout bounds a call: a limiter slower than this is treated as
// down.
const DefaultTimeout = 200 * time.Millisecond

// A Result is one call's answer.
type Result struct {
	// Allowed says whether the work may go on: the service's answer, or,
	// when Err is set, the FailMode's.
	Allowed bool
	// Remaining is the whole tokens left (from the service's answer); -1
	// when unknown.
	Remaining int64
	// RetryAfter is, on a denial, how long until the key may be allowed.
	RetryAfter time.Duration
	// Cached says the denial came from the local cache: no round trip.
	Cached bool
	// Err is why the service gave no answer; nil when it did.
	Err error
}

// Client calls one gopherpace serve (or a load balancer in front of its
// replicas). It is safe for concurrent use.
type Client struct {
	allowURL string
	http     *http.Client
	timeout  time.Duration
	denied   *deniedCache
}

// An Option configures a Client.
type Option func(*Client) error

// WithTimeout bounds each call, from 1 ms up. Default: DefaultTimeout.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) error {
		if d < time.Millisecond {
			return fmt.Errorf("serviceclient: timeout %v is under 1ms", d)
		}
		c.timeout = d
		return nil
	}
}

// WithHTTPClient sends the calls through h (its transport's connection
// pool, TLS config...). Default: a client of its own.
func WithHTTPClient(h *http.Client) Option {
	return func(c *Client) error {
		if h == nil {
			return errors.New("serviceclient: nil http.Client")
		}
		c.http = h
		return nil
	}
}

// WithDeniedCache sets how many keys the local "denied until" cache
// holds; 0 turns it off. Default: DefaultDeniedKeys.
func WithDeniedCache(keys int) Option {
	return func(c *Client) error {
		if keys < 0 {
			return fmt.Errorf("serviceclient: denied cache of %d keys", keys)
		}
		c.denied = newDeniedCache(keys)
		return nil
	}
}

// New returns a client of the service at baseURL ("http://host:8100").
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("serviceclient: %q is not an http(s) URL of the service", baseURL)
	}
	c := &Client{allowURL: u.String() + "/allow", timeout: DefaultTimeout, denied: newDeniedCache(DefaultDeniedKeys),
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}}}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("serviceclient: nil Option")
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// allowBody is /allow's answer.
type allowBody struct {
	Allowed      bool    `json:"allowed"`
	Remaining    float64 `json:"remaining"`
	RetryAfterMS int64   `json:"retry_after_ms"`
	Error        string  `json:"error"`
}

// Allow asks to spend n tokens of key, within the client's timeout and
// ctx. A key denied before, whose Retry-After has not passed, is denied
// from the local cache without a call. When the service gives no answer,
// mode decides, and Err says why. A request the service refuses as bad
// (a key too long, n above the bucket) is also an Err: it is the
// caller's mistake, and mode decides it too.
func (c *Client) Allow(ctx context.Context, key string, n int64, mode FailMode) Result {
	if mode != FailOpen && mode != FailClosed {
		return Result{Remaining: -1, Err: errors.New("serviceclient: no FailMode given: say FailOpen or FailClosed")}
	}
	if wait, ok := c.denied.until(key, time.Now()); ok {
		return Result{Remaining: 0, RetryAfter: wait, Cached: true}
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	q := url.Values{"key": {key}, "n": {strconv.FormatInt(n, 10)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.allowURL+"?"+q.Encode(), nil)
	if err != nil {
		return failed(mode, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return failed(mode, err)
	}
	defer resp.Body.Close()
	var b allowBody
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&b); err != nil {
		return failed(mode, fmt.Errorf("serviceclient: /allow answered %d with no JSON: %w", resp.StatusCode, err))
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return Result{Allowed: true, Remaining: int64(b.Remaining)}
	case http.StatusTooManyRequests:
		wait := time.Duration(b.RetryAfterMS) * time.Millisecond
		c.denied.deny(key, time.Now().Add(wait))
		return Result{Remaining: int64(b.Remaining), RetryAfter: wait}
	}
	return failed(mode, fmt.Errorf("serviceclient: /allow answered %d: %s", resp.StatusCode, b.Error))
}

func failed(mode FailMode, err error) Result {
	return Result{Allowed: mode == FailOpen, Remaining: -1, Err: err}
}
