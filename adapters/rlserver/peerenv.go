package rlserver

import (
	"path/filepath"
	"strings"
)

// envoyproxy/ratelimit is configured by environment variables; a team that
// swaps its image for this server keeps its Deployment. Each of its
// variables that means something here sets the default of the flag of the
// same meaning (a flag, or its GOPHERPACE_* variable, still wins); those
// that configure what this server does not have (Redis, Memcached, statsd,
// tracing, a debug port) are accepted and named in one INFO line at start.

// peerEnv is what envoyproxy/ratelimit's variables set.
type peerEnv struct {
	// defaults are flag defaults by GOPHERPACE_* name, without the prefix.
	defaults map[string]string
	// ignored are the variables set that configure nothing here.
	ignored []string
}

// peerIgnored are envoyproxy/ratelimit's variables, or their prefixes
// (ending in "_"), that configure what this server does without: its
// backends, its statsd and Prometheus exporters (this server's metrics
// are at /metrics), tracing, the debug listener, and xDS config.
var peerIgnored = []string{
	"REDIS_", "MEMCACHE_", "BACKEND_TYPE", "CACHE_KEY_PREFIX", "EXPIRATION_JITTER_MAX_SECONDS",
	"LOCAL_CACHE_SIZE_IN_BYTES", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
	"USE_DOG_STATSD_MOGRIFIERS", "DISABLE_STATS", "USE_PROMETHEUS", "PROMETHEUS_", "TRACING_",
	"DEBUG_HOST", "DEBUG_PORT", "CONFIG_TYPE", "CONFIG_GRPC_XDS_", "XDS_CLIENT_", "FORCE_START_WITHOUT_INITIAL_CONFIG",
	"GRPC_MAX_CONNECTION_AGE", "GRPC_MAX_CONNECTION_AGE_GRACE", "GRPC_UDS", "GRPC_CLIENT_TLS_SAN",
	"RUNTIME_WATCH_ROOT", "RUNTIME_IGNOREDOTFILES", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
}

// peerIgnoredNames lists, for the INFO line, every variable of
// peerIgnored's names and prefixes that is set; getenv cannot list the
// environment, so prefixes are tried with the suffixes envoyproxy/ratelimit
// defines.
var peerIgnoredNames = func() []string {
	var out []string
	for _, name := range peerIgnored {
		if !strings.HasSuffix(name, "_") {
			out = append(out, name)
			continue
		}
		for _, s := range peerSuffixes[name] {
			out = append(out, name+s)
		}
	}
	return out
}()

// peerSuffixes are the variables behind each ignored prefix.
var peerSuffixes = map[string][]string{
	"REDIS_": {"SOCKET_TYPE", "TYPE", "URL", "POOL_SIZE", "AUTH", "TLS", "TLS_CLIENT_CERT", "TLS_CLIENT_KEY",
		"TLS_CACERT", "TLS_SKIP_HOSTNAME_VERIFICATION", "PIPELINE_WINDOW", "PIPELINE_LIMIT", "CLUSTER_PIPELINE_PARALLELISM",
		"PERSECOND", "PERSECOND_SOCKET_TYPE", "PERSECOND_TYPE", "PERSECOND_URL", "PERSECOND_POOL_SIZE", "PERSECOND_AUTH",
		"PERSECOND_TLS", "SENTINEL_AUTH", "PERSECOND_SENTINEL_AUTH", "PERSECOND_PIPELINE_WINDOW", "PERSECOND_PIPELINE_LIMIT",
		"PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "HEALTH_CHECK_ACTIVE_CONNECTION", "TIMEOUT", "PERSECOND_TIMEOUT",
		"POOL_ON_EMPTY_BEHAVIOR", "PERSECOND_POOL_ON_EMPTY_BEHAVIOR", "STARTUP_INITIAL_INTERVAL", "STARTUP_MAX_INTERVAL",
		"STARTUP_MAX_ELAPSED_TIME"},
	"MEMCACHE_": {"HOST_PORT", "MAX_IDLE_CONNS", "SRV", "SRV_REFRESH", "TLS", "TLS_CLIENT_CERT", "TLS_CLIENT_KEY",
		"TLS_CACERT", "TLS_SKIP_HOSTNAME_VERIFICATION"},
	"PROMETHEUS_":      {"ADDR", "PATH", "MAPPER_YAML", "RESPONSE_TIME_AS_MILLISECONDS"},
	"TRACING_":         {"ENABLED", "SERVICE_NAME", "SERVICE_NAMESPACE", "SERVICE_INSTANCE_ID", "EXPORTER_PROTOCOL", "SAMPLING_RATE"},
	"CONFIG_GRPC_XDS_": {"NODE_ID", "NODE_METADATA", "SERVER_URL", "SERVER_CONNECT_RETRY_INTERVAL", "CLIENT_ADDITIONAL_HEADERS", "SERVER_USE_TLS", "CLIENT_TLS_CERT", "CLIENT_TLS_KEY", "SERVER_TLS_CACERT", "SERVER_TLS_SAN"},
	"XDS_CLIENT_":      {"BACKOFF_INITIAL_INTERVAL", "BACKOFF_MAX_INTERVAL", "BACKOFF_RANDOM_FACTOR", "BACKOFF_JITTER", "MAX_MSG_SIZE_IN_BYTES"},
}

// readPeerEnv reads envoyproxy/ratelimit's variables through getenv.
func readPeerEnv(getenv func(string) string) peerEnv {
	e := peerEnv{defaults: map[string]string{}}
	set := func(ours, value string) {
		if value != "" {
			e.defaults[ours] = value
		}
	}
	hostPort := func(host, port string) string {
		if p := getenv(port); p != "" {
			return getenv(host) + ":" + p
		}
		return ""
	}
	set("ADDR", hostPort("HOST", "PORT"))
	set("GRPC_ADDR", hostPort("GRPC_HOST", "GRPC_PORT"))
	// The config directory, loaded recursively: RUNTIME_ROOT, then
	// RUNTIME_SUBDIRECTORY, then RUNTIME_APPDIRECTORY ("config" by default),
	// whether or not RUNTIME_WATCH_ROOT is set: the files read are the
	// same, and this server reads their contents for changes either way.
	if root := getenv("RUNTIME_ROOT"); root != "" {
		app := getenv("RUNTIME_APPDIRECTORY")
		if app == "" {
			app = "config"
		}
		set("CONFIG", filepath.Join(root, getenv("RUNTIME_SUBDIRECTORY"), app))
	}
	set("RESPONSE_HEADERS", getenv("LIMIT_RESPONSE_HEADERS_ENABLED"))
	set("LIMIT_HEADER", getenv("LIMIT_LIMIT_HEADER"))
	set("REMAINING_HEADER", getenv("LIMIT_REMAINING_HEADER"))
	set("RESET_HEADER", getenv("LIMIT_RESET_HEADER"))
	set("SHADOW_MODE", getenv("SHADOW_MODE"))
	set("QUOTA_MODE", getenv("QUOTA_MODE"))
	set("MERGE_DOMAINS", getenv("MERGE_DOMAIN_CONFIG"))
	set("LOG_LEVEL", getenv("LOG_LEVEL"))
	set("NEAR_LIMIT_RATIO", getenv("NEAR_LIMIT_RATIO"))
	// statsd, where the Deployment names a server and does not turn it
	// off (envoyproxy/ratelimit sends to localhost:8125 by default).
	host, port := getenv("STATSD_HOST"), getenv("STATSD_PORT")
	if use := getenv("USE_STATSD"); !strings.EqualFold(use, "false") && (host != "" || port != "" || strings.EqualFold(use, "true")) {
		if host == "" {
			host = "localhost"
		}
		if port == "" {
			port = "8125"
		}
		set("STATSD", host+":"+port)
	}
	set("STATS_FLUSH", getenv("STATS_FLUSH_INTERVAL"))
	set("DOGSTATSD", getenv("USE_DOG_STATSD"))
	set("STATSD_TAGS", getenv("EXTRA_TAGS"))
	set("RESPONSE_DYNAMIC_METADATA", getenv("RESPONSE_DYNAMIC_METADATA"))
	set("LOG_FORMAT", getenv("LOG_FORMAT"))
	if strings.EqualFold(getenv("GRPC_SERVER_USE_TLS"), "true") {
		set("TLS_CERT", getenv("GRPC_SERVER_TLS_CERT"))
		set("TLS_KEY", getenv("GRPC_SERVER_TLS_KEY"))
		set("CLIENT_CA", getenv("GRPC_CLIENT_TLS_CACERT"))
	}
	for _, name := range peerIgnoredNames {
		if getenv(name) != "" {
			e.ignored = append(e.ignored, name)
		}
	}
	return e
}
