package rlserver

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/connlimit"
)

// Config is a limiter service's setup: the flags of gopherpace serve, or
// the GOPHERPACE_* variables of the same names (flags win).
type Config struct {
	Addr     string // HTTP listen address
	GRPCAddr string // gRPC listen address: Envoy's RateLimitService, health, and reflection if asked
	// ConfigPath is the RateLimitService's limits, a file or a directory in
	// envoyproxy/ratelimit's YAML format; "" is none (every domain answers
	// OK). It is reloaded on SIGHUP and when its contents change.
	ConfigPath string
	ConfigPoll time.Duration // how often the config's contents are read for a change
	// ResponseHeaders adds RateLimit-Limit, -Remaining and -Reset to every
	// RateLimitService answer with a limit, for Envoy to pass to the client.
	ResponseHeaders bool
	// RuleMetrics exports a series per rule of the config and outcome;
	// without it /metrics stays the same size however many rules there are.
	RuleMetrics bool
	// QuotaMode makes every rule of the config a quota rule, as if each
	// had quota_mode: true (envoyproxy/ratelimit's QUOTA_MODE).
	QuotaMode bool
	// ShadowMode answers every RateLimitService call OK, counting what
	// would have been over the limit (envoyproxy/ratelimit's SHADOW_MODE).
	ShadowMode bool
	// MergeDomains lets a domain be given in several files, their
	// descriptors merged (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG).
	MergeDomains bool
	// HeaderNames name the -response-headers fields: the limit, the
	// remaining and the reset.
	HeaderNames [3]string
	// ResponseDynamicMetadata returns, in each RateLimitService answer, the
	// request and the metadata of the descriptors that passed
	// (envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA).
	ResponseDynamicMetadata bool
	// Statsd, when set (host:port), pushes envoyproxy/ratelimit's stats to
	// that statsd server every StatsFlush, with DogStatsd's tags
	// StatsdTags when DogStatsd is set.
	Statsd     string
	StatsFlush time.Duration
	DogStatsd  bool
	StatsdTags []string
	// NearLimitRatio is the share of a bucket spent past which a hit within
	// the limit also counts as near it, for -rule-metrics' near_limit.
	NearLimitRatio float64
	// TopKeys is how /status and /status/topkeys list the keys denied and
	// admitted most: "shown" (as given), "hashed" (by keyed hash) or "off".
	TopKeys string
	// LogLevel (debug, info, warn, error) and LogFormat (text, json) are
	// the log's; the command builds its logger from them.
	LogLevel, LogFormat string
	// PeerEnvIgnored names envoyproxy/ratelimit's variables that were set
	// and configure nothing here (Redis's, say); Run logs them at INFO.
	PeerEnvIgnored []string
	MaxKeys        int64 // live buckets per rule, and for the HTTP API's limit
	// Drain is how long the server goes on serving after SIGTERM while
	// /readyz answers 503 and gRPC health NOT_SERVING, before it stops
	// accepting: longer than the load balancer's checks take to notice.
	Drain time.Duration
	// MaxConns and MaxConnsPerClient cap each listener's connections, in
	// all and from one client address (core/connlimit: the longest idle
	// give way to new ones). 0 is connlimit's default.
	MaxConns, MaxConnsPerClient int
	// GRPCReflection serves gRPC reflection, for grpcurl.
	GRPCReflection bool
	// TLSCert and TLSKey serve both listeners over TLS; ClientCA, when
	// set, makes them require client certificates signed by it. The files
	// are read again when they change (rotated certificates).
	TLSCert, TLSKey, ClientCA string

	Rate  Rate          // the refill of keys without a limit of their own
	Burst int64         // their bucket size; 0 is Rate's tokens
	Sweep time.Duration // accepted for the seed's command lines (see docs/service.md)
	// Limits are per-key limits.
	Limits map[string]Limit

	// Clustering: with Seeds, or a BindAddr other than loopback's, the
	// service gossips with its peers over memberlist, and the limits are
	// the cluster's.
	Seeds    []string // host:port of peers to join
	BindAddr string   // gossip address; "" is standalone unless Seeds are given
	BindPort int      // gossip port; 0 picks one
	NodeName string   // this replica's name; "" is the host's
	// Zone is this replica's zone or region: gossip across zones is kept
	// to a few nodes each way (memberpace.WithZone). "" is none.
	Zone      string
	SecretKey []byte // AES key for gossip (16, 24 or 32 bytes); required off loopback
	// KeyHashSecret pins the secret keys are hashed with (at least 16
	// bytes); nil: derived from SecretKey when clustered, random when not.
	KeyHashSecret []byte
}

// Limit is one key's limit: its refill and its bucket size.
type Limit struct {
	Rate  Rate
	Burst int64
}

// Clustered reports whether the service gossips with peers.
func (c Config) Clustered() bool { return len(c.Seeds) > 0 || c.BindAddr != "" }

// ParseFlags reads gopherpace serve's flags from args, after defaults
// from getenv (GOPHERPACE_ADDR, GOPHERPACE_RATE...). A bad value is an
// error naming the flag; -h writes the usage to out and returns
// flag.ErrHelp.
func ParseFlags(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	fs := flag.NewFlagSet("gopherpace serve", flag.ContinueOnError)
	fs.SetOutput(out)
	c := Config{}
	peer := readPeerEnv(getenv)
	c.PeerEnvIgnored = peer.ignored
	env := func(name, def string) string {
		if v := getenv("GOPHERPACE_" + name); v != "" {
			return v
		}
		if v, ok := peer.defaults[name]; ok {
			return v
		}
		return def
	}
	addr := fs.String("addr", env("ADDR", ":8100"), "HTTP listen address (GOPHERPACE_ADDR)")
	rate := fs.String("rate", env("RATE", "10"), "the refill of every key without a limit of its own: tokens a second (10, 0.5) or per period (100/m, 5000/h, 30/10s) (GOPHERPACE_RATE)")
	burst := fs.String("burst", env("BURST", "0"), "their bucket size; 0 is the rate's tokens (GOPHERPACE_BURST)")
	grpcAddr := fs.String("grpc-addr", env("GRPC_ADDR", ":8081"), "gRPC listen address: Envoy's RateLimitService v3 and gRPC health (GOPHERPACE_GRPC_ADDR)")
	configPath := fs.String("config", env("CONFIG", ""), "limits for the RateLimitService in envoyproxy/ratelimit's YAML format: a file, or a directory of .yaml files; reloaded on SIGHUP and on change (GOPHERPACE_CONFIG)")
	configPoll := fs.String("config-poll", env("CONFIG_POLL", "2s"), "how often -config's contents are read for a change (GOPHERPACE_CONFIG_POLL)")
	headersEnv, headersErr := strconv.ParseBool(env("RESPONSE_HEADERS", "false"))
	headers := fs.Bool("response-headers", headersEnv, "add RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset to RateLimitService answers (GOPHERPACE_RESPONSE_HEADERS)")
	maxKeys := fs.String("max-keys", env("MAX_KEYS", strconv.Itoa(gopherpace.DefaultMaxKeys)), "live buckets each limit holds at most; at the cap a new key takes the place of the bucket owing the fewest tokens (GOPHERPACE_MAX_KEYS)")
	drain := fs.String("drain", env("DRAIN", "0s"), "after SIGTERM, serve this long answering /readyz 503 and gRPC health NOT_SERVING before stopping (GOPHERPACE_DRAIN)")
	ruleMetricsEnv, ruleMetricsErr := strconv.ParseBool(env("RULE_METRICS", "false"))
	ruleMetrics := fs.Bool("rule-metrics", ruleMetricsEnv, "export gopherpace_rls_rule_decisions_total{rule,outcome}: a series per rule of -config and outcome (GOPHERPACE_RULE_METRICS)")
	quotaModeEnv, quotaModeErr := strconv.ParseBool(env("QUOTA_MODE", "false"))
	quotaMode := fs.Bool("quota-mode", quotaModeEnv, "treat every rule of -config as quota_mode: true: every hit spends, into debt where the bucket lacks it, and quota rules deny a request only when all it matches are over (GOPHERPACE_QUOTA_MODE)")
	shadowEnv, shadowErr := strconv.ParseBool(env("SHADOW_MODE", "false"))
	shadow := fs.Bool("shadow-mode", shadowEnv, "answer every RateLimitService call OK, counting what would have been over the limit (GOPHERPACE_SHADOW_MODE, or SHADOW_MODE)")
	mergeEnv, mergeErr := strconv.ParseBool(env("MERGE_DOMAINS", "false"))
	merge := fs.Bool("merge-domains", mergeEnv, "let a domain be given in several -config files, their descriptors merged (GOPHERPACE_MERGE_DOMAINS, or MERGE_DOMAIN_CONFIG)")
	limitHeader := fs.String("limit-header", env("LIMIT_HEADER", headerLimit), "name of -response-headers' limit field (GOPHERPACE_LIMIT_HEADER, or LIMIT_LIMIT_HEADER)")
	remainingHeader := fs.String("remaining-header", env("REMAINING_HEADER", headerRemaining), "name of -response-headers' remaining field (GOPHERPACE_REMAINING_HEADER, or LIMIT_REMAINING_HEADER)")
	resetHeader := fs.String("reset-header", env("RESET_HEADER", headerReset), "name of -response-headers' reset field (GOPHERPACE_RESET_HEADER, or LIMIT_RESET_HEADER)")
	dynEnv, dynErr := strconv.ParseBool(env("RESPONSE_DYNAMIC_METADATA", "false"))
	dyn := fs.Bool("response-dynamic-metadata", dynEnv, "return in each RateLimitService answer its request and the metadata of the descriptors that passed, as dynamic metadata (GOPHERPACE_RESPONSE_DYNAMIC_METADATA, or RESPONSE_DYNAMIC_METADATA)")
	statsdAddr := fs.String("statsd", env("STATSD", ""), "host:port of a statsd server to push envoyproxy/ratelimit's stats to, under its names (GOPHERPACE_STATSD; or STATSD_HOST and STATSD_PORT, unless USE_STATSD is false)")
	statsFlush := fs.String("stats-flush", env("STATS_FLUSH", "10s"), "how often -statsd is sent what changed (GOPHERPACE_STATS_FLUSH, or STATS_FLUSH_INTERVAL)")
	dogEnv, dogErr := strconv.ParseBool(env("DOGSTATSD", "false"))
	dog := fs.Bool("dogstatsd", dogEnv, "send -statsd-tags with every -statsd line, as DogStatsD tags (GOPHERPACE_DOGSTATSD, or USE_DOG_STATSD)")
	statsdTags := fs.String("statsd-tags", env("STATSD_TAGS", ""), `DogStatsD tags, "k1:v1,k2:v2" (GOPHERPACE_STATSD_TAGS, or EXTRA_TAGS)`)
	nearRatio := fs.String("near-limit-ratio", env("NEAR_LIMIT_RATIO", strconv.FormatFloat(DefaultNearLimitRatio, 'g', -1, 64)), "share of a bucket spent past which a hit counts as near_limit in -rule-metrics (GOPHERPACE_NEAR_LIMIT_RATIO, or NEAR_LIMIT_RATIO)")
	topKeys := fs.String("top-keys", env("TOP_KEYS", "shown"), "how /status and /status/topkeys list the keys denied and admitted most: shown (as given), hashed (by keyed hash: keys stay private) or off (GOPHERPACE_TOP_KEYS)")
	logLevel := fs.String("log-level", env("LOG_LEVEL", "info"), "debug, info, warn or error (GOPHERPACE_LOG_LEVEL, or LOG_LEVEL)")
	logFormat := fs.String("log-format", env("LOG_FORMAT", "text"), "text or json (GOPHERPACE_LOG_FORMAT, or LOG_FORMAT)")
	maxConns := fs.String("max-conns", env("MAX_CONNS", strconv.Itoa(connlimit.DefaultTotal)), "connections each listener holds at once; at the cap the longest idle one gives way to a new one (GOPHERPACE_MAX_CONNS)")
	maxPerClient := fs.String("max-conns-per-client", env("MAX_CONNS_PER_CLIENT", strconv.Itoa(connlimit.DefaultPerClient)), "connections one client address (IPv6: one /64) holds on each listener; behind a proxy or sidecar that connects from one address, raise it to -max-conns (GOPHERPACE_MAX_CONNS_PER_CLIENT)")
	reflectEnv, reflectErr := strconv.ParseBool(env("GRPC_REFLECTION", "false"))
	reflect := fs.Bool("grpc-reflection", reflectEnv, "serve gRPC reflection on -grpc-addr, for grpcurl (GOPHERPACE_GRPC_REFLECTION)")
	allowConfig := fs.String("allow-config", env("ALLOW_CONFIG", ""), "a YAML file of the HTTP API's limits: rate, burst, and keys with their own; -rate, -burst and -limits win over it (GOPHERPACE_ALLOW_CONFIG)")
	limits := fs.String("limits", env("LIMITS", ""), `per-key limits, "tenant-a=100:200,tenant-b=1000/h:50" (rate:burst, the rate as -rate takes it) (GOPHERPACE_LIMITS)`)
	sweep := fs.String("sweep", env("SWEEP", "1m"), "accepted for the seed service's command lines: buckets are dropped once full whatever it says (GOPHERPACE_SWEEP)")
	seedList := fs.String("seeds", env("SEEDS", ""), "host:port of peers to join, comma-separated: clusters the service (GOPHERPACE_SEEDS)")
	bind := fs.String("bind", env("BIND", ""), "gossip address; set it (or -seeds) to cluster (GOPHERPACE_BIND)")
	port := fs.String("port", env("PORT", "7946"), "gossip port; 0 picks one (GOPHERPACE_PORT)")
	node := fs.String("node", env("NODE_NAME", ""), "this replica's name; default the host's (GOPHERPACE_NODE_NAME)")
	zone := fs.String("zone", env("ZONE", ""), "this replica's zone or region, such as its node's topology.kubernetes.io/zone: gossip between zones is kept to a few nodes each way (GOPHERPACE_ZONE)")
	key := fs.String("secret-key", env("SECRET_KEY", ""), "base64 AES key (16, 24 or 32 bytes) that encrypts gossip; required off loopback (GOPHERPACE_SECRET_KEY)")
	tlsCert := fs.String("tls-cert", env("TLS_CERT", ""), "PEM certificate (chain) file: both listeners serve TLS; reloaded when it changes (GOPHERPACE_TLS_CERT)")
	tlsKey := fs.String("tls-key", env("TLS_KEY", ""), "PEM private key file of -tls-cert (GOPHERPACE_TLS_KEY)")
	clientCA := fs.String("client-ca", env("CLIENT_CA", ""), "PEM CA certificates: callers must present a client certificate they signed; needs -tls-cert (GOPHERPACE_CLIENT_CA)")
	keyHash := fs.String("key-hash-secret", env("KEY_HASH_SECRET", ""), "base64 secret (16 bytes or more) that keys are hashed with, the same on every replica; default: derived from -secret-key, or random standalone (GOPHERPACE_KEY_HASH_SECRET)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var errs []error
	bad := func(flag string, err error) { errs = append(errs, fmt.Errorf("-%s: %w", flag, err)) }
	c.Addr, c.GRPCAddr, c.ConfigPath, c.BindAddr, c.NodeName, c.Zone = *addr, *grpcAddr, *configPath, *bind, *node, *zone
	if len(c.Zone) > 255 {
		bad("zone", errors.New("longer than 255 bytes"))
	}
	var err error
	if c.ConfigPoll, err = time.ParseDuration(*configPoll); err != nil || c.ConfigPoll <= 0 {
		bad("config-poll", fmt.Errorf("%q is not a duration above zero, such as 2s", *configPoll))
	}
	if c.Drain, err = time.ParseDuration(*drain); err != nil || c.Drain < 0 {
		bad("drain", fmt.Errorf("%q is not a duration such as 5s", *drain))
	}
	if headersErr != nil {
		bad("response-headers", fmt.Errorf("GOPHERPACE_RESPONSE_HEADERS=%q is not true or false", getenv("GOPHERPACE_RESPONSE_HEADERS")))
	}
	c.ResponseHeaders = *headers
	if ruleMetricsErr != nil {
		bad("rule-metrics", fmt.Errorf("GOPHERPACE_RULE_METRICS=%q is not true or false", getenv("GOPHERPACE_RULE_METRICS")))
	}
	c.RuleMetrics = *ruleMetrics
	if quotaModeErr != nil {
		bad("quota-mode", fmt.Errorf("GOPHERPACE_QUOTA_MODE=%q is not true or false", getenv("GOPHERPACE_QUOTA_MODE")))
	}
	c.QuotaMode = *quotaMode
	if shadowErr != nil {
		bad("shadow-mode", fmt.Errorf("%q is not true or false", env("SHADOW_MODE", "")))
	}
	c.ShadowMode = *shadow
	if mergeErr != nil {
		bad("merge-domains", fmt.Errorf("%q is not true or false", env("MERGE_DOMAINS", "")))
	}
	c.MergeDomains = *merge
	if r, err := strconv.ParseFloat(*nearRatio, 64); err != nil || !(r > 0 && r <= 1) {
		bad("near-limit-ratio", fmt.Errorf("%q is not a ratio above 0 and at most 1", *nearRatio))
	} else {
		c.NearLimitRatio = r
	}
	c.Statsd = *statsdAddr
	if d, err := time.ParseDuration(*statsFlush); err != nil || d < 10*time.Millisecond {
		bad("stats-flush", fmt.Errorf("%q is not a duration of 10ms or more", *statsFlush))
	} else {
		c.StatsFlush = d
	}
	if dogErr != nil {
		bad("dogstatsd", fmt.Errorf("%q is not true or false", env("DOGSTATSD", "")))
	}
	c.DogStatsd = *dog
	for _, tag := range strings.Split(*statsdTags, ",") {
		if tag = strings.TrimSpace(tag); tag != "" {
			c.StatsdTags = append(c.StatsdTags, tag)
		}
	}
	if dynErr != nil {
		bad("response-dynamic-metadata", fmt.Errorf("%q is not true or false", env("RESPONSE_DYNAMIC_METADATA", "")))
	}
	c.ResponseDynamicMetadata = *dyn
	c.HeaderNames = [3]string{*limitHeader, *remainingHeader, *resetHeader}
	for i, name := range []string{"limit-header", "remaining-header", "reset-header"} {
		if !validHeaderName(c.HeaderNames[i]) {
			bad(name, fmt.Errorf("%q is not a header field name", c.HeaderNames[i]))
		}
	}
	switch c.TopKeys = strings.ToLower(*topKeys); c.TopKeys {
	case "shown", "hashed", "off":
	default:
		bad("top-keys", fmt.Errorf("%q is not shown, hashed or off", *topKeys))
	}
	c.LogLevel, c.LogFormat = strings.ToLower(*logLevel), strings.ToLower(*logFormat)
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		bad("log-level", err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log-format", fmt.Errorf("%q is not text or json", *logFormat))
	}
	if reflectErr != nil {
		bad("grpc-reflection", fmt.Errorf("GOPHERPACE_GRPC_REFLECTION=%q is not true or false", getenv("GOPHERPACE_GRPC_REFLECTION")))
	}
	c.GRPCReflection = *reflect
	if n, err := positive(*maxConns, false); err != nil || n > math.MaxInt32 {
		bad("max-conns", fmt.Errorf("%q is not a whole number above zero", *maxConns))
	} else {
		c.MaxConns = int(n)
	}
	if n, err := positive(*maxPerClient, false); err != nil || n > math.MaxInt32 {
		bad("max-conns-per-client", fmt.Errorf("%q is not a whole number above zero", *maxPerClient))
	} else if c.MaxConns > 0 && int(n) > c.MaxConns {
		bad("max-conns-per-client", fmt.Errorf("%d is above -max-conns (%d)", n, c.MaxConns))
	} else {
		c.MaxConnsPerClient = int(n)
	}
	if c.MaxKeys, err = positive(*maxKeys, false); err != nil {
		bad("max-keys", err)
	}
	if c.Rate, err = ParseRate(*rate); err != nil {
		bad("rate", err)
	}
	if c.Burst, err = positive(*burst, true); err != nil {
		bad("burst", err)
	}
	if c.Sweep, err = time.ParseDuration(*sweep); err != nil || c.Sweep < 0 {
		bad("sweep", fmt.Errorf("%q is not a duration such as 1m", *sweep))
	}
	if c.Limits, err = parseLimits(*limits); err != nil {
		bad("limits", err)
	}
	if *allowConfig != "" {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		rate, burst, keys, err := readAllowConfig(*allowConfig)
		switch {
		case err != nil:
			bad("allow-config", err)
		default:
			if rate != nil && !given["rate"] && getenv("GOPHERPACE_RATE") == "" {
				c.Rate = *rate
			}
			if burst > 0 && !given["burst"] && getenv("GOPHERPACE_BURST") == "" {
				c.Burst = burst
			}
			for k, l := range keys {
				if _, dup := c.Limits[k]; dup {
					bad("allow-config", fmt.Errorf("key %q is in -limits too", k))
					continue
				}
				if c.Limits == nil {
					c.Limits = map[string]Limit{}
				}
				c.Limits[k] = l
			}
		}
	}
	if *seedList != "" {
		for _, s := range strings.Split(*seedList, ",") {
			if s = strings.TrimSpace(s); s != "" {
				c.Seeds = append(c.Seeds, s)
			}
		}
	}
	if p, err := strconv.Atoi(*port); err != nil || p < 0 || p > 65535 {
		bad("port", fmt.Errorf("%q is not a port", *port))
	} else {
		c.BindPort = p
	}
	if *key != "" {
		if c.SecretKey, err = base64.StdEncoding.DecodeString(*key); err != nil {
			bad("secret-key", errors.New("not base64"))
		} else if n := len(c.SecretKey); n != 16 && n != 24 && n != 32 {
			bad("secret-key", fmt.Errorf("%d bytes; AES keys are 16, 24 or 32", n))
		}
	}
	c.TLSCert, c.TLSKey, c.ClientCA = *tlsCert, *tlsKey, *clientCA
	switch {
	case (c.TLSCert == "") != (c.TLSKey == ""):
		bad("tls-cert", errors.New("-tls-cert and -tls-key go together"))
	case c.ClientCA != "" && c.TLSCert == "":
		bad("client-ca", errors.New("needs -tls-cert and -tls-key: client certificates are asked for over TLS"))
	}
	if *keyHash != "" {
		if c.KeyHashSecret, err = base64.StdEncoding.DecodeString(*keyHash); err != nil {
			bad("key-hash-secret", errors.New("not base64"))
		} else if len(c.KeyHashSecret) < 16 {
			bad("key-hash-secret", fmt.Errorf("%d bytes; at least 16 random bytes", len(c.KeyHashSecret)))
		}
	}
	return c, errors.Join(errs...)
}

// positive parses a whole number above zero (or zero, when zeroOK).
func positive(s string, zeroOK bool) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v == 0 && !zeroOK {
		return 0, fmt.Errorf("%q is not a whole number above zero", s)
	}
	return v, nil
}

// parseLimits reads "key=rate:burst,..." as the seed service writes it,
// each rate as ParseRate reads it.
func parseLimits(s string) (map[string]Limit, error) {
	out := map[string]Limit{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		key, spec, ok := strings.Cut(strings.TrimSpace(item), "=")
		rs, bs, ok2 := strings.Cut(spec, ":")
		if !ok || !ok2 || key == "" {
			return nil, fmt.Errorf("%q is not key=rate:burst", item)
		}
		rate, err := ParseRate(rs)
		if err != nil {
			return nil, fmt.Errorf("%s's rate: %w", key, err)
		}
		burst, err := positive(bs, false)
		if err != nil {
			return nil, fmt.Errorf("%s's burst: %w", key, err)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s is given twice", key)
		}
		out[key] = Limit{Rate: rate, Burst: burst}
	}
	return out, nil
}

// ParseLogLevel reads a -log-level: debug, info, warn (or warning) or
// error, in any case.
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug", "trace":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error", "fatal", "panic":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%q is not debug, info, warn or error", s)
}

// validHeaderName reports whether s is an HTTP field name: one or more
// token characters.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}
