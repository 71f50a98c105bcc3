package gopherpace_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

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

// KeyHashSecret forwards the wrapped transport's secret, which is not a
// clock.
func (h hideClock) KeyHashSecret() []byte {
	if s, ok := h.Transport.(gopherpace.KeyHashSecreter); ok {
		return s.KeyHashSecret()
	}
	return nil
}

// tapTransport is a memtransport.Transport into which a test can also feed
// frames directly, under any sender name, as an attacker on a plaintext
// network could send them. Embedding keeps the virtual clock.
type tapTransport struct {
	*memtransport.Transport
	mu        sync.Mutex
	receivers []func(string, []byte)
	last      map[string][]byte // the last frame from each sender
}

func (t *tapTransport) Subscribe(f func(string, []byte)) func() {
	t.mu.Lock()
	t.receivers = append(t.receivers, f)
	t.mu.Unlock()
	return t.Transport.Subscribe(func(from string, frame []byte) {
		t.mu.Lock()
		if t.last == nil {
			t.last = map[string][]byte{}
		}
		t.last[from] = slices.Clone(frame)
		t.mu.Unlock()
		f(from, frame)
	})
}

// incarnationOf reads the incarnation in the last frame from a peer, as an
// eavesdropper on a plaintext network would.
func (t *tapTransport) incarnationOf(from string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.last[from]
	if len(b) < 20 {
		panic("no frame from " + from)
	}
	return binary.LittleEndian.Uint64(b[12:20])
}

// inject delivers frame to every subscriber as if it came from from.
func (t *tapTransport) inject(from string, frame []byte) {
	t.mu.Lock()
	rs := slices.Clone(t.receivers)
	t.mu.Unlock()
	for _, f := range rs {
		f(from, frame)
	}
}

// tappedCluster is cluster with every transport tapped.
func tappedCluster(t *testing.T, net *memtransport.Network, n int, opts ...gopherpace.Option) ([]*gopherpace.Limiter, []*tapTransport) {
	t.Helper()
	var taps []*tapTransport
	for i := range n {
		tr, err := net.Join(fmt.Sprintf("n%d", i))
		if err != nil {
			t.Fatal(err)
		}
		taps = append(taps, &tapTransport{Transport: tr})
	}
	var lims []*gopherpace.Limiter
	for _, tap := range taps {
		l, err := gopherpace.New(append([]gopherpace.Option{gopherpace.WithTransport(tap), gopherpace.WithLogger(discardLogger)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		lims = append(lims, l)
	}
	return lims, taps
}

// drive offers every limiter perMs one-token requests each millisecond of
// virtual time for d, and returns what each admitted.
func drive(net *memtransport.Network, lims []*gopherpace.Limiter, perMs int, d time.Duration) []int {
	admitted := make([]int, len(lims))
	for range int(d / time.Millisecond) {
		now := net.Now()
		for i, l := range lims {
			for range perMs {
				if ok, _ := l.AllowAt(now); ok {
					admitted[i]++
				}
			}
		}
		net.Advance(time.Millisecond)
	}
	return admitted
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// lastFrom is the last frame this transport received from a peer.
func (t *tapTransport) lastFrom(from string) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last[from] == nil {
		panic("no frame from " + from)
	}
	return slices.Clone(t.last[from])
}
