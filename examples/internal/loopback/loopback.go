// Package loopback starts replicas of one clustered limit in this
// process, each with its own memberlist on 127.0.0.1, the first the seed
// of the others: what the cluster demo and the scale harness share.
package loopback

import (
	"log/slog"

	"github.com/pedreviljoen/gopherpace/adapters/memberpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/seeds"
)

// Cluster is the replicas, by name, in order.
type Cluster struct {
	Transports []*memberpace.Transport
	Limiters   []*gopherpace.Limiter
}

// Start starts one replica per name, each a limiter of rate a second (and
// as large a bucket) on its own memberlist. On an error it closes what it
// started.
func Start(names []string, rate int64, logger *slog.Logger, opts ...gopherpace.Option) (*Cluster, error) {
	c := &Cluster{}
	for i, name := range names {
		opts := []memberpace.Option{memberpace.WithBindAddr("127.0.0.1"), memberpace.WithBindPort(0),
			memberpace.WithNodeName(name), memberpace.WithLogger(logger)}
		if i > 0 {
			opts = append(opts, memberpace.WithSeeds(seeds.Static{c.Transports[0].GossipAddr()}))
		}
		tr, err := memberpace.New(opts...)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Transports = append(c.Transports, tr)
	}
	for _, tr := range c.Transports {
		l, err := gopherpace.New(append([]gopherpace.Option{gopherpace.WithRefillRate(rate), gopherpace.WithTransport(tr), gopherpace.WithLogger(logger)}, opts...)...)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Limiters = append(c.Limiters, l)
	}
	return c, nil
}

// Close closes every limiter, then every transport.
func (c *Cluster) Close() {
	for _, l := range c.Limiters {
		l.Close()
	}
	for _, t := range c.Transports {
		t.Close()
	}
}
