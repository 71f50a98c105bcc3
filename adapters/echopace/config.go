package echopace

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// Config configures the middleware. Zero fields take the defaults below.
type Config struct {
	// Skipper skips the middleware for a request. Default: never.
	Skipper middleware.Skipper
	// BeforeFunc runs before the limiter, for every request not skipped.
	BeforeFunc middleware.BeforeFunc
	// Limiter decides. Required.
	Limiter *gopherpace.Limiter
	// IdentifierExtractor picks the bucket; "" is the global bucket.
	// Default: c.RealIP().
	IdentifierExtractor middleware.Extractor
	// CostFunc is the number of tokens a request spends. Default: 1.
	CostFunc func(c echo.Context) int64
	// ErrorHandler answers an extractor or cost error. Default: a 403
	// *echo.HTTPError for extractor errors (as Echo's RateLimiter does) and
	// a 500 one for cost errors, each wrapping the error.
	ErrorHandler func(c echo.Context, err error) error
	// DenyHandler answers a denial; the headers are already set. Default:
	// a 429 *echo.HTTPError, "rate limit exceeded".
	DenyHandler func(c echo.Context, identifier string, d gopherpace.Decision) error
	// Headers selects the rate-limit headers. Default: headers.Draft.
	Headers headers.Style
	// PolicyName names the policy in the draft headers.
	PolicyName string
}

// ErrRateLimitExceeded is the default denial.
var ErrRateLimitExceeded = echo.NewHTTPError(http.StatusTooManyRequests, "rate limit exceeded")

// DefaultConfig holds the defaults that fill a Config's zero fields.
var DefaultConfig = Config{
	Skipper:             middleware.DefaultSkipper,
	IdentifierExtractor: func(c echo.Context) (string, error) { return c.RealIP(), nil },
	ErrorHandler: func(c echo.Context, err error) error {
		if errors.Is(err, gopherpace.ErrInvalidCost) || errors.Is(err, gopherpace.ErrCostExceedsLimit) {
			return &echo.HTTPError{Code: http.StatusInternalServerError, Message: "rate limiter error", Internal: err}
		}
		return &echo.HTTPError{Code: http.StatusForbidden, Message: "error while extracting identifier", Internal: err}
	},
	DenyHandler: func(c echo.Context, identifier string, d gopherpace.Decision) error {
		return ErrRateLimitExceeded
	},
}

func (c Config) withDefaults() (Config, error) {
	if c.Limiter == nil {
		return c, errors.New("echopace: Config.Limiter is required")
	}
	if c.PolicyName != "" {
		if err := headers.CheckPolicyName(c.PolicyName); err != nil {
			return c, errors.New("echopace: " + err.Error())
		}
	}
	if c.Skipper == nil {
		c.Skipper = DefaultConfig.Skipper
	}
	if c.IdentifierExtractor == nil {
		c.IdentifierExtractor = DefaultConfig.IdentifierExtractor
	}
	if c.ErrorHandler == nil {
		c.ErrorHandler = DefaultConfig.ErrorHandler
	}
	if c.DenyHandler == nil {
		c.DenyHandler = DefaultConfig.DenyHandler
	}
	return c, nil
}
