package readme

import (
	"net/http"
	"net/netip"

	"github.com/gin-gonic/gin"
	fiber2 "github.com/gofiber/fiber/v2"
	fiber3 "github.com/gofiber/fiber/v3"
	echo4 "github.com/labstack/echo/v4"
	echo5 "github.com/labstack/echo/v5"
	"github.com/pedreviljoen/gopherpace/adapters/echo5pace"
	"github.com/pedreviljoen/gopherpace/adapters/echopace"
	"github.com/pedreviljoen/gopherpace/adapters/fiber3pace"
	"github.com/pedreviljoen/gopherpace/adapters/fiberpace"
	"github.com/pedreviljoen/gopherpace/adapters/ginpace"
	"github.com/pedreviljoen/gopherpace/adapters/grpcpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/httplimit"
	"google.golang.org/grpc"
)

// InlineUse is docs/adapters.md: inline use, one line per framework.
func InlineUse(limiter *gopherpace.Limiter, mux *http.ServeMux, r *gin.Engine, e *echo4.Echo, e5 *echo5.Echo, app *fiber2.App, app3 *fiber3.App) (http.Handler, *grpc.Server) {
	handler := httplimit.New(limiter)(mux) // net/http
	r.Use(ginpace.New(limiter))            // Gin
	e.Use(echopace.RateLimiter(limiter))   // Echo v4
	func(e *echo5.Echo) {
		e.Use(echo5pace.RateLimiter(limiter)) // Echo v5
	}(e5)
	app.Use(fiberpace.New(limiter)) // Fiber v2
	func(app *fiber3.App) {
		app.Use(fiber3pace.New(limiter)) // Fiber v3
	}(app3)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcpace.UnaryServerInterceptor(limiter))) // gRPC
	return handler, srv
}

// BehindALoadBalancer is docs/adapters.md: behind a load balancer.
func BehindALoadBalancer(limiter *gopherpace.Limiter, mux *http.ServeMux, r *gin.Engine, e *echo4.Echo, app *fiber2.App) (http.Handler, grpc.UnaryServerInterceptor) {
	lb := netip.MustParsePrefix("10.0.0.0/8")
	r.Use(ginpace.New(limiter, ginpace.WithTrustedProxies(lb)))
	e.Use(echopace.RateLimiter(limiter, echopace.WithTrustedProxies(lb)))
	app.Use(fiberpace.New(limiter, fiberpace.WithTrustedProxies(lb)))
	handler := httplimit.New(limiter, httplimit.WithTrustedProxies(lb))(mux)
	icpt := grpcpace.UnaryServerInterceptor(limiter, grpcpace.WithTrustedProxies(lb))
	return handler, icpt
}
