package gopherpace

import "time"

// Decision is the outcome of one request for tokens, with what a caller needs
// to answer it: HTTP 429 with Retry-After and RateLimit headers, or a gRPC
// RetryInfo.
type Decision struct {
	// Allowed reports whether the tokens were granted (and spent).
	Allowed bool
	// Limit is the bucket size: the most tokens that can be spent at once.
	Limit int64
	// Remaining is how many whole tokens are left after this decision.
	Remaining int64
	// RetryAfter is, on a denial, how long until the same request would be
	// allowed if nothing else spent tokens. Zero when Allowed.
	RetryAfter time.Duration
	// ResetAfter is how long until the bucket is full again.
	ResetAfter time.Duration
	// Window is how long an empty bucket takes to fill: Limit tokens at the
	// refill rate. Limit/Window is the effective rate.
	Window time.Duration
}

// NextTokenAfter is how long until at least one more token becomes
// available: zero when the bucket is full, RetryAfter on a denial.
func (d Decision) NextTokenAfter() time.Duration {
	if !d.Allowed {
		return d.RetryAfter
	}
	if d.Remaining >= d.Limit || d.Limit <= 0 || d.ResetAfter <= 0 {
		return 0
	}
	interval := d.Window / time.Duration(d.Limit)
	if interval <= 0 {
		return 0
	}
	// Tokens appear each time ResetAfter crosses a multiple of interval
	// below Window.
	rem := (d.Window - d.ResetAfter) % interval
	return interval - rem
}
