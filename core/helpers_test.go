package gopherpace_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// Helpers shared by this package's external tests.

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// cluster starts n limiters on one memtransport network.
func cluster(t *testing.T, net *memtransport.Network, n int, opts ...gopherpace.Option) ([]*gopherpace.Limiter, []*memtransport.Transport) {
	t.Helper()
	var trs []*memtransport.Transport
	for i := range n {
		tr, err := net.Join(fmt.Sprintf("n%d", i))
		if err != nil {
			t.Fatal(err)
		}
		trs = append(trs, tr)
	}
	var lims []*gopherpace.Limiter
	for i, tr := range trs {
		l, err := gopherpace.New(append([]gopherpace.Option{
			gopherpace.WithTransport(tr), gopherpace.WithNodeName(tr.Name()), gopherpace.WithLogger(discardLogger),
		}, append(opts, gopherpace.WithNodeName(fmt.Sprintf("n%d", i)))...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		lims = append(lims, l)
	}
	return lims, trs
}

// countingHandler counts log records by level.
type countingHandler struct {
	mu     sync.Mutex
	counts map[slog.Level]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[r.Level]++
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// hideClock exposes only the Transport methods, so the engine falls back to
// real timers (virtual inside a synctest bubble).
type hideClock struct{ gopherpace.Transport }
