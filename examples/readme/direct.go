package readme

import (
	"net/http"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/httplimit"
)

// Direct is README.md: calling the limiter directly.
func Direct(limiter *gopherpace.Limiter) {
	ok, retryAfter := limiter.Allow()     // one token from the global bucket
	d, err := limiter.Take("tenant-a", 5) // five tokens from tenant-a's bucket
	// d.Allowed, d.Remaining, d.BucketSize, d.RetryAfter, d.ResetAfter, d.Window
	_, _, _, _ = ok, retryAfter, d, err
}

// SeveralLimits is README.md: several limits, all or nothing.
func SeveralLimits(mux *http.ServeMux) http.Handler {
	perIP, _ := gopherpace.New(gopherpace.WithRate(10, time.Second))
	perKey, _ := gopherpace.New(gopherpace.WithRate(100, time.Hour))
	handler := httplimit.New(perIP,
		httplimit.WithAlso(perKey, httplimit.HeaderKey("X-API-Key"), "per-key"),
	)(mux)
	return handler
}
