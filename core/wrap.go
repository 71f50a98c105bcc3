package gopherpace

import (
	"net/http"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// wrapPolicy renders Wrap's denials: the draft fields of the default
// rule.
var wrapPolicy = render.NewPolicy(render.Draft, render.DefaultName)

// Wrap returns a handler that spends one token of the global bucket per
// request and answers 429 Too Many Requests ("rate limit exceeded", as
// every adapter says), with Retry-After and the draft RateLimit headers,
// when the bucket is empty. Allowed requests pass to
// next untouched. For keys, costs, skips and other headers use the
// httplimit package.
func (l *Limiter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d Decision
		_, _ = l.decideNow(&d, "", 1) // a cost of 1 never errs
		l.counts.take(&d, 1)
		if d.Allowed {
			next.ServeHTTP(w, r)
			return
		}
		render.WriteTooManyRequests(w, wrapPolicy, render.Decision(d), time.Time{})
	})
}
