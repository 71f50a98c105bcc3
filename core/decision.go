package gopherpace

import (
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// Decision is the outcome of one request for tokens, with what a caller needs
// to answer it: HTTP 429 with Retry-After and RateLimit headers (see the
// headers package), or a gRPC RetryInfo.
type Decision struct {
	// Allowed reports whether the tokens were granted (and spent), or, in
	// shadow mode, let through.
	Allowed bool
	// Shadowed reports a request that the limit denied and shadow mode
	// (WithShadowMode) let through: Allowed is true, nothing was spent,
	// and RetryAfter and Remaining describe the denial.
	Shadowed bool
	// BucketSize is the bucket's size: the most tokens that can be spent at
	// once.
	BucketSize int64
	// Remaining is how many whole tokens are left after this decision.
	Remaining int64
	// RetryAfter is, on a denial, how long until the same request would be
	// allowed if nothing else spent tokens. Zero when Allowed.
	RetryAfter time.Duration
	// ResetAfter is how long until the bucket is full again.
	ResetAfter time.Duration
	// Window is how long an empty bucket takes to fill: BucketSize tokens at
	// the refill rate. BucketSize/Window is the effective rate.
	Window time.Duration
}

// NextTokenAfter is how long until at least one more token becomes
// available: zero when the bucket is full, RetryAfter on a denial.
func (d Decision) NextTokenAfter() time.Duration { return render.Decision(d).NextTokenAfter() }

// raw is d as the bucket arithmetic fills it: the same fields, in the
// internal type that carries no documentation.
func (d *Decision) raw() *render.Decision { return (*render.Decision)(d) }
