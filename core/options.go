package gopherpace

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/cluster"
	"github.com/pedreviljoen/gopherpace/core/transportkit"
)

// Option configures a Limiter. Options are checked by New, which returns an
// error for any invalid value instead of panicking.
type Option func(*config)

type config struct {
	rate          int64         // tokens per period
	per           time.Duration // the period
	rateSet       bool
	rateWords     string // the option that set the rate, as written
	bucketSize    int64
	bucketSizeSet bool
	nodeName      string
	logger        *slog.Logger
	maxKeys       int64
	hashSecret    []byte // nil: the transport's, or random (keyhash.go)
	shadow        bool
	lookup        *lookupConfig
	overrides     []override
	errs          []error
	topKeys       bool // WithTopKeys
	topShown      bool // WithTopKeys(true)

	transport Transport
	interval  time.Duration
	partition PartitionPolicy
	grace     time.Duration
	limiterID string
	// floorAtZero reproduces the reference design's algorithm (debits
	// floored at an empty bucket, no early flush, no local cap) as the
	// accuracy harness's baseline. Not exported: nobody should run it.
	floorAtZero bool
	// leaseProcs sizes the leases for that many processors instead of
	// GOMAXPROCS; set by tests only.
	leaseProcs int
}

// PartitionPolicy says what a clustered limiter does while it can hear only
// part of the cluster.
type PartitionPolicy uint8

const (
	// PartitionShare (the default) refills at R × visible/known nodes, so
	// the sides of a split together still admit about R. Once the
	// transport's failure detector declares the other side dead, a strict
	// majority takes the whole rate back, and a strict minority keeps its
	// share: it cannot tell the others' crash from a partition, and
	// serving its share beats refusing everyone when they crashed. A true
	// partition then admits R plus the minority's share until the heal.
	PartitionShare PartitionPolicy = iota
	// PartitionFailClosed shares like PartitionShare, but a node cut off
	// from every peer admits nothing (Allow returns (false, 1s)), and a
	// strict minority that the failure detector has cut from the others
	// refills nothing, unless the transport knows them gone
	// (GoneReporter): no partition admits more than R, and a crash of a
	// majority of the nodes stops the survivors for the grace period.
	PartitionFailClosed
	// PartitionFailOpen keeps refilling at the full rate R on every side,
	// so a k-way split admits up to k×R.
	PartitionFailOpen
)

func (p PartitionPolicy) String() string { return cluster.Partition(p).String() }

// Defaults for clustering.
const (
	// DefaultGossipInterval bounds how stale a peer's view of this node's
	// admits gets. At 100 ms the cluster overshoots a window by well under
	// a tenth of the bucket (see docs/accuracy.md); the seed's 500 ms lets it
	// overshoot by several times that, for a fifth of the packets.
	DefaultGossipInterval = 100 * time.Millisecond
	// DefaultPeerGracePeriod is how long a silent peer keeps counting as a
	// cluster member. It must outlast the partitions you expect to heal: a
	// longer one under-admits for longer after a crash (R×(N−1)/N), a
	// shorter one lets both sides of a longer partition take a full share.
	DefaultPeerGracePeriod = 10 * time.Second
	// DefaultLimiterID names the limiter on the wire.
	DefaultLimiterID = "default"
)

// WithTransport makes the limit cluster-wide: the limiter tells its peers
// over t what it admits and charges what they admit. Limiters sharing one
// transport need distinct WithLimiterID values.
func WithTransport(t Transport) Option {
	return func(c *config) {
		if t == nil {
			c.errs = append(c.errs, errorf("WithTransport(nil): pass a transport, such as memberpace.New's, or leave the option out for a standalone limiter"))
		}
		c.transport = t
	}
}

// WithGossipInterval sets how often a clustered node reports its admits to
// its peers: every half interval, and sooner once enough go unreported. A
// peer not heard from for 1.5 intervals counts as cut off. Between 1 ms and
// 1 minute; default DefaultGossipInterval.
func WithGossipInterval(d time.Duration) Option {
	return func(c *config) {
		if d < time.Millisecond || d > time.Minute {
			c.errs = append(c.errs, errorf("gossip interval must be between 1ms and 1m, got %v (the default is %v)", d, DefaultGossipInterval))
		}
		c.interval = d
	}
}

// WithPartitionPolicy sets what happens while this node hears only part of
// the cluster. Default PartitionShare.
func WithPartitionPolicy(p PartitionPolicy) Option {
	return func(c *config) {
		if p > PartitionFailOpen {
			c.errs = append(c.errs, errorf("unknown partition policy %d: use PartitionShare, PartitionFailClosed or PartitionFailOpen", p))
		}
		c.partition = p
	}
}

// WithPeerGracePeriod sets how long a peer that stopped talking without
// saying goodbye (a crash, or the far side of a partition) still counts as
// a member. At least two gossip intervals; default DefaultPeerGracePeriod.
func WithPeerGracePeriod(d time.Duration) Option {
	return func(c *config) { c.grace = d }
}

// WithLimiterID names this limiter on the wire. Every node must give the
// same ID to the same limit, and limiters that share a transport need
// different IDs. Default DefaultLimiterID.
func WithLimiterID(id string) Option {
	return func(c *config) {
		if id == "" {
			c.errs = append(c.errs, errorf("limiter ID must not be empty: leave WithLimiterID out for %q, or name the limit", DefaultLimiterID))
		}
		c.limiterID = id
	}
}

type override struct {
	key, words         string // words: the option as written
	tokens, bucketSize int64
	per                time.Duration
}

// DefaultMaxKeys is the default cap on live keyed buckets (about 40 MB).
const DefaultMaxKeys = 1 << 20

// WithRate sets the sustained rate: tokens per period, for any period
// from a microsecond to a leap year (366 days), such as WithRate(100, time.Hour). It is
// the rate across the whole cluster when clustering is on. In any span t
// a bucket admits at most tokens·t/per plus its bucket size. Required
// (or WithRefillRate); tokens must be at least 1 and at most one per
// nanosecond of the period.
func WithRate(tokens int64, per time.Duration) Option {
	return func(c *config) { c.setRate(bucket.RateWords("WithRate", tokens, per, 0), tokens, per) }
}

// WithRefillRate sets the rate in whole tokens per second: WithRate(n,
// time.Second). n must be between 1 and 1e9.
func WithRefillRate(tokensPerSecond int64) Option {
	return func(c *config) {
		c.setRate(bucket.RateWords("WithRefillRate", tokensPerSecond, time.Second, 0), tokensPerSecond, time.Second)
	}
}

// setRate records the rate and the words that set it; a second rate is
// refused rather than silently winning.
func (c *config) setRate(words string, tokens int64, per time.Duration) {
	if c.rateSet {
		c.errs = append(c.errs, errorf("%s and %s both set the rate: keep one", c.rateWords, words))
		return
	}
	c.rate, c.per, c.rateSet, c.rateWords = tokens, per, true, words
}

// WithBucketSize sets the bucket capacity in whole tokens: the largest burst
// allowed at once. Defaults to the tokens of one period (WithRate(100,
// time.Hour): 100; WithRefillRate(50): 50); must be at least 1.
func WithBucketSize(tokens int64) Option {
	return func(c *config) { c.bucketSize, c.bucketSizeSet = tokens, true }
}

// WithNodeName sets this node's name in logs. A clustered limiter takes its
// name from its Transport, so there is one name per node everywhere; given
// with WithTransport, it must equal the transport's. Defaults to the host
// name standalone.
func WithNodeName(name string) Option {
	return func(c *config) {
		if name == "" {
			c.errs = append(c.errs, errorf("node name must not be empty: leave WithNodeName out for the host name"))
		}
		c.nodeName = name
	}
}

// WithLogger sets the logger. Every record carries component=gopherpace.
// Nothing is ever logged per request. Defaults to slog.Default().
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) {
		if logger == nil {
			c.errs = append(c.errs, errorf("logger must not be nil: leave WithLogger out for slog.Default()"))
		}
		c.logger = logger
	}
}

// WithMaxKeys caps the number of live keyed buckets (buckets that are not
// full). At the cap a new key takes the place of the bucket that owes the
// fewest tokens of a random sample; that bucket's debt is kept in a
// 24-byte ghost (up to a quarter of the cap's keys) and given back when
// its key returns. Every key keeps a bucket of its own and its own limit,
// and Stats.KeysEvicted counts the evictions. Defaults to DefaultMaxKeys;
// must be at least 1.
func WithMaxKeys(n int64) Option {
	return func(c *config) { c.maxKeys = n }
}

// WithOverride gives one key its own rate, in tokens per second, and
// bucket size instead of the limiter's defaults, e.g. a paying tenant. The
// same validation applies.
func WithOverride(key string, tokensPerSecond, bucketSize int64) Option {
	return func(c *config) {
		WithOverrideRate(key, tokensPerSecond, time.Second, bucketSize)(c)
		if o := &c.overrides[len(c.overrides)-1]; o.key == key {
			o.words = fmt.Sprintf("WithOverride(%q, %d, %d)", key, tokensPerSecond, bucketSize)
		}
	}
}

// WithOverrideRate is WithOverride with the rate over any period, as
// WithRate takes it: WithOverrideRate("tenant-a", 10000, time.Hour, 500).
func WithOverrideRate(key string, tokens int64, per time.Duration, bucketSize int64) Option {
	return func(c *config) {
		if key == "" {
			c.errs = append(c.errs, errorf("override key must not be empty (the global bucket uses the limiter's own rate)"))
		}
		c.overrides = append(c.overrides, override{key: key, tokens: tokens, per: per, bucketSize: bucketSize,
			words: fmt.Sprintf("WithOverrideRate(%q, %d, %v, %d)", key, tokens, per, bucketSize)})
	}
}

// WithShadowMode makes the limiter decide, count and gossip as usual but
// never deny: a request over the limit is let through with
// Decision.Shadowed set, spends nothing, and is counted in
// Stats.ShadowDenials; an INFO record at most every 30 s says how many.
// Use it to try a limit on real traffic before enforcing it. Adapters let
// such requests through, with the fields of the denial.
func WithShadowMode() Option { return func(c *config) { c.shadow = true } }

// WithKeyHashSecret pins the secret of the keyed hash that names keys
// (SipHash-1-3): at least 16 random bytes, the same on every node of a
// cluster. Without it the secret is random per limiter standalone, and
// clustered it is the transport's (memberpace derives it from the gossip
// encryption key), so nobody who lacks it can find two keys that share a
// bucket. Pin it when the transport gives none (plaintext gossip), or to
// keep keys' buckets across a change of the gossip key.
func WithKeyHashSecret(secret []byte) Option {
	return func(c *config) {
		if len(secret) < 16 {
			c.errs = append(c.errs, errorf("WithKeyHashSecret: %d bytes; the secret must be at least 16 random bytes", len(secret)))
		}
		c.hashSecret = append([]byte(nil), secret...)
	}
}

// bucket.KeyHasher is the hasher the options give (keyhash.go), and whether its
// secret is public: clustered over a transport that gives none.
func (c *config) keyHasher() (h bucket.KeyHasher, public bool) {
	switch {
	case c.hashSecret != nil:
		return bucket.NewKeyHasher(c.hashSecret), false
	case c.transport == nil:
		return bucket.RandomKeyHasher(), false
	}
	if s, ok := c.transport.(KeyHashSecreter); ok {
		if secret := s.KeyHashSecret(); len(secret) >= 16 {
			return bucket.NewKeyHasher(secret), false
		}
	}
	return bucket.NewKeyHasher(bucket.PublicSecret), true
}

func defaultConfig() config {
	return config{
		maxKeys:   DefaultMaxKeys,
		interval:  DefaultGossipInterval,
		grace:     DefaultPeerGracePeriod,
		limiterID: DefaultLimiterID,
	}
}

// finish checks the options together and fills in defaults. It reports
// every bad option at once (errors.Join), each in the words of the option
// the user wrote.
func (c *config) finish() error {
	errs := c.errs
	if !c.rateSet {
		errs = append(errs, errorf("WithRate (or WithRefillRate) is required: the sustained rate, such as WithRate(100, time.Hour) or WithRefillRate(100)"))
	}
	if !c.bucketSizeSet {
		c.bucketSize = c.rate
	}
	if c.grace < 2*c.interval {
		errs = append(errs, errorf("peer grace period %v must be at least two gossip intervals (%v): raise WithPeerGracePeriod or lower WithGossipInterval", c.grace, 2*c.interval))
	}
	if c.rateSet {
		if _, err := bucket.NewRule(c.rate, c.per, c.bucketSize); err != nil {
			if c.bucketSizeSet {
				errs = append(errs, errorf("%s with WithBucketSize(%d): %w", c.rateWords, c.bucketSize, err))
			} else {
				errs = append(errs, errorf("%s: %w", c.rateWords, err))
			}
		}
	}
	for _, o := range c.overrides {
		if o.key == "" {
			continue // reported by the option
		}
		if _, err := bucket.NewRule(o.tokens, o.per, o.bucketSize); err != nil {
			errs = append(errs, errorf("%s: %w", o.words, err))
		}
	}
	return c.finishNode(errs)
}

// finishInFlight checks the options of an in-flight limit (NewInFlight):
// those of a node, and none of a rate's.
func (c *config) finishInFlight() error {
	errs := c.errs
	for _, o := range []struct {
		set    bool
		option string
	}{
		{c.rateSet, c.rateWords}, {c.bucketSizeSet, "WithBucketSize"}, {len(c.overrides) > 0, "WithOverride"},
		{c.shadow, "WithShadowMode"}, {c.lookup != nil, "WithLookup"}, {c.topKeys, "WithTopKeys"},
		{c.partition != PartitionShare, "WithPartitionPolicy"}, {c.grace != DefaultPeerGracePeriod, "WithPeerGracePeriod"},
	} {
		if o.set {
			errs = append(errs, errorf("%s does not apply to an in-flight limit: it caps requests at once, not a rate", o.option))
		}
	}
	return c.finishNode(errs)
}

// finishNode checks what every limit takes (its keys, its transport) and
// fills in the node's name and logger; errs are the checks so far.
func (c *config) finishNode(errs []error) error {
	if c.maxKeys < 1 {
		errs = append(errs, errorf("WithMaxKeys(%d): max keys must be at least 1 (the default is %d)", c.maxKeys, DefaultMaxKeys))
	}
	if c.transport != nil {
		if c.nodeName != "" && c.nodeName != c.transport.Name() {
			errs = append(errs, errorf("node name %q differs from the transport's %q: a clustered limiter is named by its transport; leave WithNodeName out", c.nodeName, c.transport.Name()))
		}
		c.nodeName = c.transport.Name()
		if fs := c.transport.MaxFrameSize(); fs < transportkit.MinFrameSize {
			errs = append(errs, errorf("transport's MaxFrameSize %d is below the minimum of %d bytes: a transport must carry at least that much in one frame", fs, transportkit.MinFrameSize))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
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
