package gopherpace

import (
	"log/slog"
	"os"
)

// Option configures a Limiter. Options are checked by New, which returns an
// error for any invalid value instead of panicking.
type Option func(*config)

type config struct {
	rate      int64
	burst     int64
	burstSet  bool
	nodeName  string
	logger    *slog.Logger
	maxKeys   int64
	keySeed   uint64
	overrides []override
	errs      []error
}

type override struct {
	key         string
	rate, burst int64
}

// DefaultMaxKeys is the default cap on live keyed buckets (about 40 MB).
const DefaultMaxKeys = 1 << 20

// WithRefillRate sets the refill rate in whole tokens per second: the
// sustained number of requests allowed per second, across the whole cluster
// when clustering is on. Required; must be between 1 and 1e9.
func WithRefillRate(tokensPerSecond int64) Option {
	return func(c *config) { c.rate = tokensPerSecond }
}

// WithBucketSize sets the bucket capacity in whole tokens: the largest burst
// allowed at once. Defaults to the refill rate (one second of traffic); must
// be at least 1.
func WithBucketSize(tokens int64) Option {
	return func(c *config) { c.burst, c.burstSet = tokens, true }
}

// WithNodeName sets this node's identity in logs and, when clustered, in the
// cluster. Defaults to the host name.
func WithNodeName(name string) Option {
	return func(c *config) {
		if name == "" {
			c.errs = append(c.errs, errorf("node name must not be empty"))
		}
		c.nodeName = name
	}
}

// WithLogger sets the logger. Every record carries component=gopherpace.
// Nothing is ever logged per request. Defaults to slog.Default().
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) {
		if logger == nil {
			c.errs = append(c.errs, errorf("logger must not be nil"))
		}
		c.logger = logger
	}
}

// WithMaxKeys caps the number of live keyed buckets (buckets that are not
// full). Once the cap is reached, requests for new keys share a single
// overflow bucket with the default rate and size until idle buckets are
// swept; keys already live keep their own buckets. Defaults to
// DefaultMaxKeys; must be at least 1.
func WithMaxKeys(n int64) Option {
	return func(c *config) { c.maxKeys = n }
}

// WithOverride gives one key its own rate and bucket size instead of the
// limiter's defaults, e.g. a paying tenant. The same validation applies.
func WithOverride(key string, tokensPerSecond, bucketSize int64) Option {
	return func(c *config) {
		if key == "" {
			c.errs = append(c.errs, errorf("override key must not be empty (the global bucket uses the limiter's own rate)"))
		}
		c.overrides = append(c.overrides, override{key, tokensPerSecond, bucketSize})
	}
}

// WithKeySeed seeds the 64-bit hash that identifies keys. Every node of a
// cluster must use the same seed. Set a secret one when keys come from
// untrusted clients, so nobody can craft two keys that share a bucket.
func WithKeySeed(seed uint64) Option {
	return func(c *config) { c.keySeed = seed }
}

func defaultConfig() config {
	return config{maxKeys: DefaultMaxKeys}
}

func (c *config) finish() error {
	if len(c.errs) > 0 {
		return c.errs[0]
	}
	if c.rate == 0 {
		return errorf("WithRefillRate is required")
	}
	if !c.burstSet {
		c.burst = c.rate
	}
	if c.maxKeys < 1 {
		return errorf("max keys must be >= 1, got %d", c.maxKeys)
	}
	if c.nodeName == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "gopherpace"
		}
		c.nodeName = host
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return nil
}
