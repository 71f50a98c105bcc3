package httplimit

import (
	"errors"
	"net/http"
	"net/netip"

	"github.com/pedreviljoen/gopherpace/core/clientip"
)

// KeyFunc picks the bucket a request spends from. The empty key is the
// limiter's global bucket. An error is answered by the error handler and
// spends nothing.
type KeyFunc func(r *http.Request) (string, error)

// ErrMissingKey is returned by a KeyFunc when the request lacks the value
// it keys on. The default error handler answers it with 400 Bad Request.
var ErrMissingKey = errors.New("httplimit: request has no rate-limit key")

// GlobalKey puts every request in the limiter's one global bucket.
func GlobalKey(*http.Request) (string, error) { return "", nil }

// ClientIPKey keys requests by client address (see package clientip),
// trusting forwarding headers only from peers inside trustedProxies.
func ClientIPKey(trustedProxies ...netip.Prefix) KeyFunc {
	trusted := make([]netip.Prefix, len(trustedProxies))
	for i, p := range trustedProxies {
		trusted[i] = p.Masked()
	}
	return func(r *http.Request) (string, error) {
		addr, err := clientip.FromRequest(r, trusted)
		if err != nil {
			return "", err
		}
		return clientip.Key(addr), nil
	}
}

// HeaderKey keys requests by the value of a request header, such as an API
// key. A request without it gets ErrMissingKey.
func HeaderKey(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		if v == "" {
			return "", ErrMissingKey
		}
		return v, nil
	}
}
