package httplimit

import (
	"net/http"

	"github.com/pedreviljoen/gopherpace/core/adapter"
)

// KeyFunc picks the bucket a request spends from. The empty key is the
// limiter's global bucket. An error is answered by the error handler and
// spends nothing.
type KeyFunc func(r *http.Request) (string, error)

// ErrMissingKey is returned by a KeyFunc when the request lacks the value
// it keys on. The default error handler answers it with 400 Bad Request.
var ErrMissingKey = adapter.ErrMissingKey

// GlobalKey puts every request in the limiter's one global bucket.
func GlobalKey(*http.Request) (string, error) { return "", nil }

// HeaderKey keys requests by the value of a request header, such as an API
// key. A request without it gets ErrMissingKey.
func HeaderKey(name string) KeyFunc {
	missing := adapter.MissingKey("the " + name + " header") // as the user wrote it
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		if v == "" {
			return "", missing
		}
		return v, nil
	}
}
