package gopherpace

import (
	"net/http"
	"time"
)

// Wrap returns a handler that spends one token of the global bucket per
// request and answers 429 Too Many Requests, with Retry-After and the draft
// RateLimit headers, when the bucket is empty. Allowed requests pass to
// next untouched. For keys, costs, skips and other headers use the
// httplimit package.
func (l *Limiter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d Decision
		_ = l.take(&d, int64(time.Since(l.epoch)), "", 1) // a cost of 1 never errs
		if d.Allowed {
			next.ServeHTTP(w, r)
			return
		}
		WriteTooManyRequests(w, d, Headers{}, time.Now())
	})
}

// WriteTooManyRequests answers a denied request: the headers of d in the
// given style, then 429 with a short text body.
func WriteTooManyRequests(w http.ResponseWriter, d Decision, h Headers, now time.Time) {
	hdr := w.Header()
	h.SetAt(hdr, d, now)
	hdr["Content-Type"] = []string{"text/plain; charset=utf-8"}
	hdr["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte("Too Many Requests\n"))
}
