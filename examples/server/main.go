// Command server is a rate-limited HTTP service configured by environment
// variables, for the Kubernetes and VM examples: every replica enforces one
// cluster-wide limit, gossiping over memberlist.
//
//	GOPHERPACE_RATE            cluster-wide requests per second for /work (required)
//	GOPHERPACE_BURST           its bucket size (default: the rate)
//	GOPHERPACE_CLIENT_RATE     requests per second each client may make to /api,
//	                           across the cluster; its bucket is as large (default 10)
//	GOPHERPACE_TRUSTED_PROXIES comma-separated networks (CIDR) of the load balancers
//	                           in front: their X-Forwarded-For names /api's client
//	                           (default none: the connection's address is the client)
//	GOPHERPACE_SHOW_KEYS       "true": /status/topkeys lists client addresses as they
//	                           are (default: by their keyed hashes, since addresses
//	                           are personal data)
//	GOPHERPACE_DNS             headless Service name to find peers (or:)
//	GOPHERPACE_SEEDS           comma-separated host:port peers
//	GOPHERPACE_GOSSIP_PORT     gossip port, UDP and TCP (default 7946)
//	GOPHERPACE_BIND_ADDR       gossip bind address (default 0.0.0.0)
//	GOPHERPACE_ADVERTISE_ADDR  address peers should use (the pod IP)
//	GOPHERPACE_NODE_NAME       unique node name (default host name + random suffix)
//	GOPHERPACE_ZONE            this replica's zone or region (for example its node's
//	                           topology.kubernetes.io/zone): limiter frames cross
//	                           between zones once, not once per replica (default none)
//	GOPHERPACE_SECRET_KEY      base64 AES key (16, 24 or 32 bytes) to encrypt gossip
//	                           (required unless the bind address is loopback, or:)
//	GOPHERPACE_PLAINTEXT       "true": gossip unencrypted on purpose (trusted network only)
//	GOPHERPACE_PARTITION       share (default), fail-closed or fail-open
//	GOPHERPACE_GRACE           how long a silent peer still counts (default 10s;
//	                           set it above the longest partition to heal)
//	GOPHERPACE_HTTP_ADDR       HTTP listen address (default :8080)
//	GOPHERPACE_DRAIN           how long to go on serving after SIGTERM while
//	                           /readyz answers 503, so that load balancers stop
//	                           sending first (default 0; the manifest sets 5s)
//	GOPHERPACE_MAX_CONNS       connections held at once (default 1024); at the cap
//	                           the longest idle ones give way to new ones
//	GOPHERPACE_MAX_CONNS_PER_CLIENT
//	                           connections one client address holds (default 256);
//	                           behind a proxy that connects from one address, raise
//	                           it to GOPHERPACE_MAX_CONNS
//
// Routes: /work is limited by one cluster-wide bucket, /api by one per
// client; /healthz is not (liveness); /readyz answers 200 while this
// replica serves and 503 once it is shutting down (readiness: peers out of
// sight never make it unready); /cluster answers 503 while peers it knows
// of are out of sight (for alerts and people); /status is the live status
// page of /work's limit, and /status/cluster every replica's side by side
// (read as /status/topkeys reads them); /status/topkeys lists the clients /api denied and admitted most as
// JSON, this replica's or, with ?cluster=true, every replica's summed (each
// read on its pod address at this replica's HTTP port); /metrics is for
// Prometheus; /stats shows the limiter's view of the cluster as JSON.
//
// On SIGTERM it answers /readyz with 503 for GOPHERPACE_DRAIN, then stops
// accepting connections, finishes the requests in flight, and only then
// says goodbye to its peers, so that no request fails in a rolling deploy.
//
// No client can hold its port: connections are capped in all and per
// client address (core/connlimit), and a connection that is slow to send
// its request, slow to read its answer, or idle is closed.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pedreviljoen/gopherpace/adapters/memberpace"
	"github.com/pedreviljoen/gopherpace/adapters/prompace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/connlimit"
	"github.com/pedreviljoen/gopherpace/core/httplimit"
	"github.com/pedreviljoen/gopherpace/core/status"
	"github.com/pedreviljoen/gopherpace/seeds"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type config struct {
	rate, burst int64
	clientRate  int64
	trusted     []netip.Prefix
	showKeys    bool
	seeds       seeds.Provider
	gossip      []memberpace.Option
	partition   gopherpace.PartitionPolicy
	grace       time.Duration
	httpAddr    string
	drain       time.Duration
	conns       connlimit.Limits
}

// loadConfig reads the environment through getenv.
func loadConfig(getenv func(string) string) (config, error) {
	c := config{httpAddr: ":8080"}
	var err error
	if c.rate, err = strconv.ParseInt(getenv("GOPHERPACE_RATE"), 10, 64); err != nil {
		return c, fmt.Errorf("GOPHERPACE_RATE: %w", err)
	}
	c.burst = c.rate
	if v := getenv("GOPHERPACE_BURST"); v != "" {
		if c.burst, err = strconv.ParseInt(v, 10, 64); err != nil {
			return c, fmt.Errorf("GOPHERPACE_BURST: %w", err)
		}
	}
	c.clientRate = 10
	if v := getenv("GOPHERPACE_CLIENT_RATE"); v != "" {
		if c.clientRate, err = strconv.ParseInt(v, 10, 64); err != nil || c.clientRate < 1 {
			return c, fmt.Errorf("GOPHERPACE_CLIENT_RATE: %q is not a whole number above zero", v)
		}
	}
	if v := getenv("GOPHERPACE_TRUSTED_PROXIES"); v != "" {
		for _, n := range strings.Split(v, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(n))
			if err != nil {
				return c, fmt.Errorf("GOPHERPACE_TRUSTED_PROXIES: %w", err)
			}
			c.trusted = append(c.trusted, p)
		}
	}
	c.showKeys = getenv("GOPHERPACE_SHOW_KEYS") == "true"
	port := memberpace.DefaultPort
	if v := getenv("GOPHERPACE_GOSSIP_PORT"); v != "" {
		if port, err = strconv.Atoi(v); err != nil {
			return c, fmt.Errorf("GOPHERPACE_GOSSIP_PORT: %w", err)
		}
	}
	c.gossip = append(c.gossip, memberpace.WithBindPort(port))
	switch dns, static := getenv("GOPHERPACE_DNS"), getenv("GOPHERPACE_SEEDS"); {
	case dns != "" && static != "":
		c.seeds = seeds.Fallback{seeds.DNS{Host: dns, Port: port}, seeds.Static(strings.Split(static, ","))}
	case dns != "":
		c.seeds = seeds.DNS{Host: dns, Port: port}
	case static != "":
		c.seeds = seeds.Static(strings.Split(static, ","))
	}
	if c.seeds != nil {
		c.gossip = append(c.gossip, memberpace.WithSeeds(c.seeds))
	}
	if v := getenv("GOPHERPACE_BIND_ADDR"); v != "" {
		c.gossip = append(c.gossip, memberpace.WithBindAddr(v))
	}
	if v := getenv("GOPHERPACE_ADVERTISE_ADDR"); v != "" {
		c.gossip = append(c.gossip, memberpace.WithAdvertise(v, port))
	}
	if v := getenv("GOPHERPACE_NODE_NAME"); v != "" {
		c.gossip = append(c.gossip, memberpace.WithNodeName(v))
	}
	if v := getenv("GOPHERPACE_ZONE"); v != "" {
		c.gossip = append(c.gossip, memberpace.WithZone(v))
	}
	if v := getenv("GOPHERPACE_PLAINTEXT"); v == "true" || v == "1" {
		c.gossip = append(c.gossip, memberpace.WithPlaintext())
	}
	if v := getenv("GOPHERPACE_SECRET_KEY"); v != "" {
		key, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return c, fmt.Errorf("GOPHERPACE_SECRET_KEY: not base64: %w", err)
		}
		c.gossip = append(c.gossip, memberpace.WithSecretKeys(key))
	}
	switch v := getenv("GOPHERPACE_PARTITION"); v {
	case "", "share":
		c.partition = gopherpace.PartitionShare
	case "fail-closed":
		c.partition = gopherpace.PartitionFailClosed
	case "fail-open":
		c.partition = gopherpace.PartitionFailOpen
	default:
		return c, fmt.Errorf("GOPHERPACE_PARTITION: %q is not share, fail-closed or fail-open", v)
	}
	if v := getenv("GOPHERPACE_GRACE"); v != "" {
		if c.grace, err = time.ParseDuration(v); err != nil || c.grace <= 0 {
			return c, fmt.Errorf("GOPHERPACE_GRACE: %q is not a duration such as 30s", v)
		}
	}
	if v := getenv("GOPHERPACE_HTTP_ADDR"); v != "" {
		c.httpAddr = v
	}
	for _, v := range []struct {
		name string
		to   *int
	}{{"GOPHERPACE_MAX_CONNS", &c.conns.Total}, {"GOPHERPACE_MAX_CONNS_PER_CLIENT", &c.conns.PerClient}} {
		if s := getenv(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return c, fmt.Errorf("%s: %q is not a whole number above zero", v.name, s)
			}
			*v.to = n
		}
	}
	if v := getenv("GOPHERPACE_DRAIN"); v != "" {
		if c.drain, err = time.ParseDuration(v); err != nil || c.drain < 0 {
			return c, fmt.Errorf("GOPHERPACE_DRAIN: %q is not a duration such as 5s", v)
		}
	}
	return c, nil
}

func main() {
	cfg, err := loadConfig(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, nil); err != nil {
		log.Fatal(err)
	}
}

// serve runs until ctx ends. When ready is not nil it receives the HTTP
// and gossip addresses once both listen.
func serve(ctx context.Context, cfg config, ready chan<- [2]string) error {
	logger := slog.Default()
	tr, err := memberpace.New(append(cfg.gossip, memberpace.WithLogger(logger))...)
	if err != nil {
		return err
	}
	defer tr.Close()
	// What both limiters share: the cluster and how it behaves.
	node := []gopherpace.Option{gopherpace.WithTransport(tr), gopherpace.WithPartitionPolicy(cfg.partition), gopherpace.WithLogger(logger)}
	if cfg.grace > 0 {
		node = append(node, gopherpace.WithPeerGracePeriod(cfg.grace))
	}
	limiter, err := gopherpace.New(append(node, gopherpace.WithRefillRate(cfg.rate), gopherpace.WithBucketSize(cfg.burst))...)
	if err != nil {
		return err
	}
	defer limiter.Close() // before tr.Close: says goodbye to the peers
	perClient, err := gopherpace.New(append(node[:len(node):len(node)], gopherpace.WithRefillRate(cfg.clientRate),
		gopherpace.WithBucketSize(cfg.clientRate), gopherpace.WithLimiterID("api"), gopherpace.WithTopKeys(cfg.showKeys))...)
	if err != nil {
		return err
	}
	defer perClient.Close()
	// One cluster-wide bucket for /work, whoever calls it, so that the
	// demo shows the limit holding across replicas; and one per client for
	// /api, so that the top keys show who is limited.
	limited := httplimit.New(limiter, httplimit.WithKeyFunc(httplimit.GlobalKey))
	perClientLimited := httplimit.New(perClient, httplimit.WithTrustedProxies(cfg.trusted...))
	done := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "done") })
	mux := http.NewServeMux()
	mux.Handle("/work", limited(done))
	mux.Handle("/api", perClientLimited(done))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	var draining atomic.Bool
	readiness := status.Ready(limiter)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if draining.Load() {
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
			return
		}
		readiness.ServeHTTP(w, r)
	})
	mux.Handle("/cluster", status.Health(limiter))
	page := status.NewPage("gopherpace example server", limiter)
	mux.Handle("/status", page)
	metrics := prompace.New()
	if err := errors.Join(metrics.Add("work", limiter), metrics.Add("api", perClient), metrics.AddTransport("memberlist", tr)); err != nil {
		return err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics)
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	tcp, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return err
	}
	ln, err := connlimit.Wrap(tcp, cfg.conns, "http", logger)
	if err != nil {
		tcp.Close()
		return err
	}
	// The other replicas' pages: on their cluster addresses, at this
	// replica's HTTP port (every pod of a Deployment listens on one).
	httpPort := strconv.Itoa(tcp.Addr().(*net.TCPAddr).Port)
	others := func(path string) func() []string {
		return func() []string {
			var urls []string
			for _, a := range tr.MemberAddrs() {
				urls = append(urls, "http://"+net.JoinHostPort(a.String(), httpPort)+path)
			}
			return urls
		}
	}
	mux.Handle("/status/cluster", status.NewClusterPage("gopherpace example server", page, others("/status")))
	mux.Handle("/status/topkeys", status.TopKeys(perClient, others("/status/topkeys")))
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(struct {
			Node        string
			Members     []string
			Limiter     gopherpace.Stats
			Gossip      memberpace.Stats
			Connections connlimit.Stats
		}{tr.Name(), tr.Members(), limiter.Stats(), tr.Stats(), ln.Stats()})
	})
	srv := &http.Server{
		Handler: mux, ConnState: ln.ConnState, MaxHeaderBytes: 16 << 10,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		IdleTimeout: 60 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("serving", "http", ln.Addr().String(), "gossip", tr.GossipAddr(), "rate", cfg.rate)
	if ready != nil {
		ready <- [2]string{ln.Addr().String(), tr.GossipAddr()}
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Out of rotation first, still serving; then no new connections, the
	// requests in flight finished; the goodbye follows in the defers.
	draining.Store(true)
	if cfg.drain > 0 {
		logger.Info("draining: /readyz answers 503 before the server stops accepting", "for", cfg.drain)
		time.Sleep(cfg.drain)
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
