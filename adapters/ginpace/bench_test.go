package ginpace

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/pedreviljoen/gopherpace/core/conformance"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// ginRequest serves one GET from 192.0.2.1 through a Gin engine using mw.
func ginRequest(mw ...gin.HandlerFunc) conformance.BenchRequest {
	r := gin.New()
	r.Use(mw...)
	served := 0
	r.GET("/", func(c *gin.Context) { served++; c.Status(http.StatusOK) })
	return conformance.HandlerRequest(r, &served)
}

// BenchmarkGin measures ginpace on the admit path beside bare Gin, a
// middleware that does nothing (any middleware costs Gin a step of its
// chain) and a bare Take (conformance.BenchMiddleware has the rows).
// Each includes Gin's routing and the handler. Gin has no limiter of its
// own to compare with; bench/ compares the net/http middleware with its
// peers.
func BenchmarkGin(b *testing.B) {
	conformance.BenchMiddleware(b, conformance.MiddlewareBench[gin.HandlerFunc, Option]{
		Prefix:  "ginpace",
		Request: ginRequest,
		Floor:   func(c *gin.Context) { c.Next() },
		FieldsFloor: func(policy, limit string) gin.HandlerFunc {
			p, l := []string{policy}, []string{limit}
			return func(c *gin.Context) {
				h := c.Writer.Header()
				h[headers.RateLimitPolicy], h[headers.RateLimit] = p, l
				c.Next()
			}
		},
		New:     New,
		Options: adapterOptions,
	})
}
