// Package rlserver is gopherpace as a service, for callers that are not Go
// programs: the HTTP API of a limiter service (GET|POST /allow?key=K&n=N,
// /stats, /healthz), whose replicas share each limit over memberlist with
// no store. The gopherpace command (cmd/gopherpace) runs it;
// docs/service.md has the API, the flags and what is not built yet.
package rlserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/pedreviljoen/gopherpace/adapters/memberpace"
	"github.com/pedreviljoen/gopherpace/adapters/prompace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/seeds"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
// HTTP address once it is listening.
func Run(ctx context.Context, c Config, log *slog.Logger, started func(httpAddr string)) error {
	var opts []gopherpace.Option
	burst := c.Burst
	if burst == 0 {
		burst = c.Rate
	}
	opts = append(opts, gopherpace.WithRefillRate(c.Rate), gopherpace.WithBucketSize(burst), gopherpace.WithLogger(log))
	keys := make([]string, 0, len(c.Limits))
	for k := range c.Limits {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		opts = append(opts, gopherpace.WithOverride(k, c.Limits[k][0], c.Limits[k][1]))
	}
	var transport *memberpace.Transport
	if c.Clustered() {
		topts := []memberpace.Option{memberpace.WithBindPort(c.BindPort), memberpace.WithLogger(log)}
		if c.BindAddr != "" {
			topts = append(topts, memberpace.WithBindAddr(c.BindAddr))
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

	reg := prometheus.NewRegistry()
	metrics := prompace.New()
	if err := metrics.Add("service", l); err != nil {
		return err
	}
	if transport != nil {
		if err := metrics.AddTransport("memberlist", transport); err != nil {
			return err
		}
	}
	if err := reg.Register(metrics); err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           handler(l, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})),
		ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, WriteTimeout: writeTimeout,
		IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	log.Info("serving", "addr", ln.Addr().String(), "clustered", c.Clustered())
	if started != nil {
		started(ln.Addr().String())
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(shutdown)
	if serveErr := <-done; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}
