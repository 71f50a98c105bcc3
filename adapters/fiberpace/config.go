package fiberpace

import (
	"errors"

	"github.com/gofiber/fiber/v2"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// Config configures the middleware; zero fields take ConfigDefault's.
type Config struct {
	// Next skips the middleware when it returns true.
	Next func(c *fiber.Ctx) bool
	// KeyGenerator picks the bucket; "" is the global bucket. Default: c.IP().
	KeyGenerator func(c *fiber.Ctx) string
	// Cost is the number of tokens a request spends. Default: 1.
	Cost func(c *fiber.Ctx) int64
	// LimitReached answers a denial; the headers are already set.
	// Default: 429 Too Many Requests.
	LimitReached fiber.Handler
	// ErrorHandler answers a cost error. Default: a 500 *fiber.Error.
	ErrorHandler func(c *fiber.Ctx, err error) error
	// SkipFailedRequests gives the tokens back when the response status is
	// 400 or above, including errors returned by later handlers.
	SkipFailedRequests bool
	// SkipSuccessfulRequests gives the tokens back when the status is below 400.
	SkipSuccessfulRequests bool
	// Headers selects the rate-limit headers. Default: headers.Draft.
	Headers headers.Style
	// PolicyName names the policy in the draft headers.
	PolicyName string
}

// ConfigDefault holds the defaults.
var ConfigDefault = Config{
	KeyGenerator: func(c *fiber.Ctx) string { return c.IP() },
	LimitReached: func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusTooManyRequests) },
	ErrorHandler: func(c *fiber.Ctx, err error) error {
		return fiber.NewError(fiber.StatusInternalServerError, "rate limiter error")
	},
}

func configure(cfgs []Config) (Config, error) {
	cfg := ConfigDefault
	if len(cfgs) > 1 {
		return cfg, errors.New("fiberpace: at most one Config")
	}
	if len(cfgs) == 1 {
		cfg = cfgs[0]
		if cfg.KeyGenerator == nil {
			cfg.KeyGenerator = ConfigDefault.KeyGenerator
		}
		if cfg.LimitReached == nil {
			cfg.LimitReached = ConfigDefault.LimitReached
		}
		if cfg.ErrorHandler == nil {
			cfg.ErrorHandler = ConfigDefault.ErrorHandler
		}
	}
	if cfg.PolicyName != "" {
		if err := headers.CheckPolicyName(cfg.PolicyName); err != nil {
			return cfg, errors.New("fiberpace: " + err.Error())
		}
	}
	if cfg.SkipFailedRequests && cfg.SkipSuccessfulRequests {
		return cfg, errors.New("fiberpace: SkipFailedRequests and SkipSuccessfulRequests together would count nothing")
	}
	return cfg, nil
}
