package scenario

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/pedreviljoen/gopherpace/adapters/memberpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/seeds"
)

// Gopherpace starts n limiters over real memberlist on loopback, each
// node's callers asking their own limiter: R a second cluster-wide, a
// bucket of B.
func Gopherpace(n int, r, b int64) (System, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var trs []*memberpace.Transport
	var lims []*gopherpace.Limiter
	closeAll := func() {
		for _, l := range lims {
			l.Close()
		}
		for _, t := range trs {
			t.Close()
		}
	}
	for i := range n {
		opts := []memberpace.Option{memberpace.WithBindAddr("127.0.0.1"), memberpace.WithBindPort(0), memberpace.WithLogger(quiet),
			memberpace.WithNodeName(fmt.Sprint("node-", i))}
		if i > 0 {
			opts = append(opts, memberpace.WithSeeds(seeds.Static{trs[0].GossipAddr()}))
		}
		tr, err := memberpace.New(opts...)
		if err != nil {
			closeAll()
			return System{}, err
		}
		trs = append(trs, tr)
		l, err := gopherpace.New(gopherpace.WithRate(r, time.Second), gopherpace.WithBucketSize(b), gopherpace.WithTransport(tr), gopherpace.WithLogger(quiet))
		if err != nil {
			closeAll()
			return System{}, err
		}
		lims = append(lims, l)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, l := range lims {
		for l.Stats().HeardNodes < int64(n) {
			if time.Now().After(deadline) {
				closeAll()
				return System{}, fmt.Errorf("the %d nodes never all heard each other", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return System{
		Name:  "gopherpace over memberlist",
		Allow: func(node int) bool { ok, _ := lims[node].Allow(); return ok },
		Close: closeAll,
	}, nil
}
