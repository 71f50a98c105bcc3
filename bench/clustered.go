package bench

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/adapters/memberpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/seeds"
)

// A pairOfNodes is two memberlist transports on loopback, joined, each
// with a limiter: the measured node has a real peer that receives its
// reports and sends its own.
type pairOfNodes struct {
	once  sync.Once
	err   error
	lims  [2]*gopherpace.Limiter
	trs   [2]*memberpace.Transport
	limit limit
	keys  int
}

func (p *pairOfNodes) start() error {
	p.once.Do(func() {
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		for i := range p.trs {
			opts := []memberpace.Option{memberpace.WithBindAddr("127.0.0.1"), memberpace.WithBindPort(0), memberpace.WithLogger(quiet)}
			if i == 1 {
				opts = append(opts, memberpace.WithSeeds(seeds.Static{p.trs[0].GossipAddr()}))
			}
			if p.trs[i], p.err = memberpace.New(opts...); p.err != nil {
				return
			}
		}
		for i := range p.lims {
			opts := []gopherpace.Option{gopherpace.WithTransport(p.trs[i]), gopherpace.WithLogger(quiet)}
			if p.limit == keepLive {
				// A clustered bucket refills within 417 days: 1 a minute
				// with a bucket of 500,000 keeps every key live for the
				// row (its rounds take seconds).
				opts = append(opts, gopherpace.WithRate(1, time.Minute), gopherpace.WithBucketSize(500_000), gopherpace.WithMaxKeys(int64(p.keys)+1))
			} else {
				opts = append(opts, gopherpace.WithRate(1_000_000_000, time.Second), gopherpace.WithBucketSize(1_000_000_000))
			}
			if p.lims[i], p.err = gopherpace.New(opts...); p.err != nil {
				return
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for p.lims[0].Stats().HeardNodes < 2 || p.lims[1].Stats().HeardNodes < 2 {
			if time.Now().After(deadline) {
				p.err = errors.New("the two nodes never heard each other")
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		for i := range p.keys {
			p.lims[0].Take(key(i), 1)
		}
	})
	return p.err
}

func (p *pairOfNodes) close() {
	for i := range p.lims {
		if p.lims[i] != nil {
			p.lims[i].Close()
		}
		if p.trs[i] != nil {
			p.trs[i].Close()
		}
	}
}

// clusteredRows measure the clustered request path with a real peer
// against the same calls on a standalone limiter.
func clusteredRows() []Row {
	allowPair := &pairOfNodes{limit: admitAll}
	keyedPair := &pairOfNodes{limit: keepLive, keys: 1_000}
	standaloneKeyed := &keyedFixture{c: ours(), n: 1_000}
	return []Row{
		{Name: "Allow, clustered (memberlist peer)", Target: 1.2,
			Ours: Entry{"gopherpace clustered", func(b *testing.B) {
				if err := allowPair.start(); err != nil {
					b.Fatal(err)
				}
				run(b, false, func() bool { ok, _ := allowPair.lims[0].Allow(); return ok }, admitting)
			}},
			Peers: []Entry{{"gopherpace standalone", func(b *testing.B) {
				allow, err := ours().allow(admitAll)
				if err != nil {
					b.Fatal(err)
				}
				run(b, false, allow, admitting)
			}}},
			Release: allowPair.close},
		// No target: the peer node runs on the same two cores, receiving
		// and charging every key's counts, so the ratio carries its work.
		{Name: "keyed 1k, clustered (memberlist peer), parallel",
			Ours: Entry{"gopherpace clustered", func(b *testing.B) {
				if err := keyedPair.start(); err != nil {
					b.Fatal(err)
				}
				keyedRun(b, keyedPair.keys, func(k string) bool { d, err := keyedPair.lims[0].Take(k, 1); return err == nil && d.Allowed })
			}},
			Peers:   []Entry{{"gopherpace standalone", standaloneKeyed.bench}},
			Release: func() { keyedPair.close(); standaloneKeyed.release() }},
	}
}
