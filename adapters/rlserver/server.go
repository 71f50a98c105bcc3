// Package rlserver is gopherpace as a service, for callers that are not Go
// programs: the HTTP API of a limiter service (GET|POST /allow?key=K&n=N,
// /stats, /healthz), whose replicas share each limit over memberlist with
// no store. The gopherpace command (cmd/gopherpace) runs it;
// docs/service.md has the API, the flags and what is not built yet.
package rlserver

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/adapters/memberpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/connlimit"
	"github.com/pedreviljoen/gopherpace/seeds"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
)

// Listener timeouts: a slow or half-open client holds a connection this
// long at the most.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 10 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 16 << 10
	shutdownTimeout   = 5 * time.Second
)

// Run serves c until ctx is done, then stops taking requests, finishes
// those in flight, and leaves the cluster. started, if set, is told the
// HTTP and gRPC addresses once both are listening. hup, if set, delivers a
// signal for each config reload asked for (SIGHUP).
func Run(ctx context.Context, c Config, log *slog.Logger, started func(httpAddr, grpcAddr string), hup <-chan os.Signal) error {
	var cfg *rlsConfig
	var loaded [sha256.Size]byte // the config's fingerprint, taken before it is read
	if c.ConfigPath != "" {
		var err error
		loaded = fingerprint(c.ConfigPath)
		if cfg, err = loadRLSConfig(c.ConfigPath, c.MergeDomains); err != nil {
			return fmt.Errorf("-config: %w", err)
		}
	}
	var opts []gopherpace.Option
	opts = append(opts, gopherpace.WithRate(c.Rate.Tokens, c.Rate.Per), gopherpace.WithLogger(log))
	if c.Burst > 0 {
		opts = append(opts, gopherpace.WithBucketSize(c.Burst))
	}
	var shared []gopherpace.Option // every limiter's, the HTTP API's and each rule's
	if c.KeyHashSecret != nil {
		shared = append(shared, gopherpace.WithKeyHashSecret(c.KeyHashSecret))
	}
	if c.TopKeys == "shown" || c.TopKeys == "hashed" {
		shared = append(shared, gopherpace.WithTopKeys(c.TopKeys == "shown"))
	}
	opts = append(opts, shared...)
	if c.MaxKeys > 0 {
		opts = append(opts, gopherpace.WithMaxKeys(c.MaxKeys))
	}
	keys := make([]string, 0, len(c.Limits))
	for k := range c.Limits {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lim := c.Limits[k]
		opts = append(opts, gopherpace.WithOverrideRate(k, lim.Rate.Tokens, lim.Rate.Per, lim.Burst))
	}
	var transport *memberpace.Transport
	if c.Clustered() {
		topts := []memberpace.Option{memberpace.WithBindPort(c.BindPort), memberpace.WithLogger(log)}
		if c.BindAddr != "" {
			topts = append(topts, memberpace.WithBindAddr(c.BindAddr))
		}
		if c.Zone != "" {
			topts = append(topts, memberpace.WithZone(c.Zone))
		}
		if c.NodeName != "" {
			topts = append(topts, memberpace.WithNodeName(c.NodeName))
		}
		if len(c.Seeds) > 0 {
			topts = append(topts, memberpace.WithSeeds(seeds.Static(c.Seeds)))
		}
		if c.SecretKey != nil {
			topts = append(topts, memberpace.WithSecretKeys(c.SecretKey))
		}
		var err error
		if transport, err = memberpace.New(topts...); err != nil {
			if errors.Is(err, memberpace.ErrUnencrypted) {
				return fmt.Errorf("-bind %s: gossip off loopback needs -secret-key (GOPHERPACE_SECRET_KEY): a base64 key of 16, 24 or 32 bytes, the same on every replica, such as `openssl rand -base64 32` makes; anyone who can reach an unencrypted gossip port can report admits and switch the limit off", c.BindAddr)
			}
			return fmt.Errorf("gossip: %w", err)
		}
		defer transport.Close()
		opts = append(opts, gopherpace.WithTransport(transport))
	}
	l, err := gopherpace.New(opts...)
	if err != nil {
		return err
	}
	defer l.Close() // before the transport: tells the peers this node leaves

	metrics, err := newServiceMetrics(l, transport)
	if err != nil {
		return err
	}
	var t gopherpace.Transport
	if transport != nil {
		t = transport
	}
	maxKeys := c.MaxKeys
	if maxKeys <= 0 {
		maxKeys = gopherpace.DefaultMaxKeys
	}
	rls, err := newRLSService(cfg, t, maxKeys, c.ResponseHeaders, log, metrics, shared...)
	if err != nil {
		return fmt.Errorf("-config: %w", err)
	}
	defer rls.close()
	rls.quotaAll, rls.shadowAll, rls.mergeDomains = c.QuotaMode, c.ShadowMode, c.MergeDomains
	rls.dynamicMetadata = c.ResponseDynamicMetadata
	if c.NearLimitRatio > 0 {
		rls.stats = newDescriptorStats(c.NearLimitRatio)
	}
	if c.ConfigPath != "" {
		rls.counts.configLoaded.Add(1)
	}
	if c.Statsd != "" {
		var tags []string
		if c.DogStatsd {
			tags = c.StatsdTags
		}
		// statsd is for people: a server it cannot reach (a name that does
		// not resolve) is logged, and the limits are served without it.
		if sink, err := newStatsdSink(c.Statsd, tags, c.StatsFlush, log); err != nil {
			log.Error("statsd is off: its address does not work", "statsd", c.Statsd, "err", err)
		} else {
			rls.byRule = true // the counts statsd sends
			statsCtx, stopStats := context.WithCancel(context.Background())
			statsDone := make(chan struct{})
			go func() { sink.run(statsCtx, rls); close(statsDone) }()
			defer func() { stopStats(); <-statsDone }()
		}
	}
	if c.HeaderNames != [3]string{} {
		rls.headerNames = c.HeaderNames
	}
	if len(c.PeerEnvIgnored) > 0 {
		log.Info("envoyproxy/ratelimit's variables set here configure nothing in this server (no Redis, Memcached, statsd or debug port; metrics are at /metrics)",
			"ignored", strings.Join(c.PeerEnvIgnored, ","))
	}
	debug.FreeOSMemory() // what reading the config held goes back to the system
	if c.RuleMetrics {
		rls.byRule = true
		if err := metrics.reg.Register(ruleCollector{rls}); err != nil {
			return err
		}
	}

	var draining atomic.Bool
	var httpPort atomic.Int64 // this replica's HTTP port, the others' too
	srv := &http.Server{
		Handler:           handler(l, promhttp.HandlerFor(metrics.reg, promhttp.HandlerOpts{}), &draining, rls, peerPages(c, transport, &httpPort)),
		ErrorLog:          connErrorLog(log),
		ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, WriteTimeout: writeTimeout,
		IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err == nil {
		httpPort.Store(int64(ln.Addr().(*net.TCPAddr).Port))
	}
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	gln, err := net.Listen("tcp", c.GRPCAddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("-grpc-addr: %w", err)
	}
	caps := connlimit.Limits{Total: c.MaxConns, PerClient: c.MaxConnsPerClient}
	hl, err := connlimit.Wrap(ln, caps, "http", log)
	if err != nil {
		ln.Close()
		gln.Close()
		return fmt.Errorf("-max-conns: %w", err)
	}
	gl, _ := connlimit.Wrap(gln, caps, "grpc", log) // the same caps: no error
	if err := metrics.addListeners(map[string]*connlimit.Listener{"http": hl, "grpc": gl}); err != nil {
		hl.Close()
		gl.Close()
		return err
	}
	srv.ConnState = hl.ConnState
	ln, gln = hl, gl
	gopts := grpcOptions{conns: gl, reflection: c.GRPCReflection, log: log, metrics: metrics}
	if c.TLSCert != "" {
		files, err := newTLSFiles(c.TLSCert, c.TLSKey, c.ClientCA, log)
		if err != nil {
			ln.Close()
			gln.Close()
			return err
		}
		srv.TLSConfig = files.config("h2", "http/1.1")
		ln = tls.NewListener(ln, srv.TLSConfig)
		gopts.tls = files.config("h2")
	}
	g, health := newGRPCServer(rls, gopts)
	log.Info("serving", "addr", ln.Addr().String(), "grpc", gln.Addr().String(), "clustered", c.Clustered(), "config", c.ConfigPath,
		"tls", c.TLSCert != "", "client certificates", c.ClientCA != "")
	if started != nil {
		started(ln.Addr().String(), gln.Addr().String())
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if c.ConfigPath != "" {
		go rls.watch(watchCtx, c.ConfigPath, c.ConfigPoll, hup, loaded)
	}
	if transport != nil {
		setHealth(health, transport.JoinError())
		go watchJoin(watchCtx, transport, health)
	}
	done := make(chan error, 2)
	go func() { done <- srv.Serve(ln) }()
	go func() { done <- g.Serve(gln) }()
	served := 0
	select {
	case err = <-done:
		served = 1
	case <-ctx.Done():
	}
	// Out of rotation first, still serving: /readyz answers 503 and gRPC
	// health NOT_SERVING for c.Drain, so load balancers, Kubernetes and
	// Envoy's health checks move callers away; then no new connections,
	// the calls in flight finished; the goodbye follows in the defers.
	draining.Store(true)
	health.Shutdown()
	if c.Drain > 0 && err == nil {
		log.Info("draining: /readyz answers 503 and gRPC health NOT_SERVING before the server stops accepting", "for", c.Drain)
		time.Sleep(c.Drain)
	}
	shutdown, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	if herr := srv.Shutdown(shutdown); herr != nil {
		// Connections still busy after shutdownTimeout (a client that
		// never finishes its request): they are closed, not waited for,
		// and the replica still leaves its peers cleanly.
		log.Warn("closing the HTTP connections still busy at shutdown", "after", shutdownTimeout, "err", herr)
		_ = srv.Close()
	}
	select {
	case <-stopped:
	case <-shutdown.Done():
		g.Stop()
		<-stopped
	}
	for ; served < 2; served++ {
		if serveErr := <-done; err == nil && serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) && !errors.Is(serveErr, grpc.ErrServerStopped) {
			err = serveErr
		}
	}
	return err
}

// connErrorLog is the HTTP server's log of what its clients do wrong (a
// failed TLS handshake, a malformed request line): one WARN record at most
// every logEvery with the count since, so that a client cannot flood the
// log one connection at a time.
func connErrorLog(log *slog.Logger) *stdlog.Logger {
	return stdlog.New(&limitedWriter{log: log}, "", 0)
}

type limitedWriter struct {
	log        *slog.Logger
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now := time.Now(); w.last.IsZero() || now.Sub(w.last) >= logEvery {
		w.log.Warn("a client's connection failed", "err", strings.TrimSpace(truncate(string(p), 256)), "like it since the last record", w.suppressed)
		w.last, w.suppressed = now, 0
	} else {
		w.suppressed++
	}
	return len(p), nil
}

// peerPages gives the URLs of the other replicas' status pages: each
// member's gossip address at this replica's HTTP port (replicas of one
// Deployment listen alike). Members come only from the transport, whose
// gossip is authenticated, so no caller chooses what /status/cluster
// reads. Over TLS the page shows this replica alone: reading the others
// would need a client certificate of their CA.
func peerPages(c Config, t *memberpace.Transport, port *atomic.Int64) func() []string {
	if t == nil || c.TLSCert != "" {
		return nil
	}
	return func() []string {
		var urls []string
		for _, a := range t.MemberAddrs() {
			urls = append(urls, "http://"+net.JoinHostPort(a.String(), strconv.FormatInt(port.Load(), 10))+"/status")
		}
		return urls
	}
}
