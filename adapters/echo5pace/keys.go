package echo5pace

import (
	"github.com/labstack/echo/v5"
	"github.com/pedreviljoen/gopherpace/core/adapter"
)

// KeyFunc picks the bucket for a request; "" is the limiter's global
// bucket. An error is answered by the error handler and spends nothing.
type KeyFunc func(c *echo.Context) (string, error)

// ErrMissingKey is returned by a KeyFunc when the request lacks the value
// it keys on. The default error handler answers it with 400 Bad Request.
var ErrMissingKey = adapter.ErrMissingKey

// GlobalKey puts every request in the limiter's global bucket.
func GlobalKey(*echo.Context) (string, error) { return "", nil }

// HeaderKey keys requests by the value of a request header, such as an API
// key. A request without it gets ErrMissingKey.
func HeaderKey(name string) KeyFunc {
	missing := adapter.MissingKey("the " + name + " header")
	return func(c *echo.Context) (string, error) {
		if v := c.Request().Header.Get(name); v != "" {
			return v, nil
		}
		return "", missing
	}
}
