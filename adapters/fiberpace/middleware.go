package fiberpace

import (
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// New returns middleware that limits requests with l.
func New(l *gopherpace.Limiter, config ...Config) (fiber.Handler, error) {
	if l == nil {
		return nil, errors.New("fiberpace: nil Limiter")
	}
	cfg, err := configure(config)
	if err != nil {
		return nil, err
	}
	h, err := headers.New(cfg.Headers, cfg.PolicyName)
	if err != nil {
		return nil, errors.New("fiberpace: " + err.Error())
	}
	refunds := cfg.SkipFailedRequests || cfg.SkipSuccessfulRequests
	return func(c *fiber.Ctx) error {
		if cfg.Next != nil && cfg.Next(c) {
			return c.Next()
		}
		key := cfg.KeyGenerator(c)
		if refunds {
			// The key is used again after the handler, by which time fasthttp
			// may have reused the bytes behind it. (The limiter itself keeps
			// only a hash of the key, never the string.)
			key = strings.Clone(key)
		}
		cost := int64(1)
		if cfg.Cost != nil {
			cost = cfg.Cost(c)
		}
		now := time.Now()
		d, err := l.TakeAt(now, key, cost)
		if err != nil {
			return cfg.ErrorHandler(c, err)
		}
		if h.Style() != headers.None || !d.Allowed {
			var buf [headers.MaxFields]headers.Field
			for _, f := range h.Append(buf[:0], d, now) {
				c.Set(f.Name, f.Value)
			}
		}
		if !d.Allowed {
			return cfg.LimitReached(c)
		}
		err = c.Next()
		if refunds {
			failed := status(c, err) >= fiber.StatusBadRequest
			if failed && cfg.SkipFailedRequests || !failed && cfg.SkipSuccessfulRequests {
				l.Refund(key, cost)
			}
		}
		return err
	}, nil
}

// status is the response status a request will end with: an error that
// later handlers returned decides it (the app's error handler writes it
// after this middleware returns), as a *fiber.Error's code or 500.
func status(c *fiber.Ctx, err error) int {
	if err == nil {
		return c.Response().StatusCode()
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return fiber.StatusInternalServerError
}
