package gopherpace_test

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// stalledTransport is a node whose process stops running for a while, as
// one starved of CPU does: its timers fire late and the frames that reach
// it wait in its queue until it runs again.
type stalledTransport struct {
	*memtransport.Transport
	net        *memtransport.Network
	mu         sync.Mutex
	stallUntil time.Time
}

func (s *stalledTransport) stall(d time.Duration) {
	s.mu.Lock()
	s.stallUntil = s.net.Now().Add(d)
	s.mu.Unlock()
}

// resumeAt is when something due at now runs: now, or the end of a stall.
func (s *stalledTransport) resumeAt() (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if wait := s.stallUntil.Sub(s.net.Now()); wait > 0 {
		return wait, true
	}
	return 0, false
}

func (s *stalledTransport) AfterFunc(d time.Duration, f func()) func() bool {
	var run func()
	run = func() {
		if wait, stalled := s.resumeAt(); stalled {
			s.net.AfterFunc(wait, run)
			return
		}
		f()
	}
	return s.net.AfterFunc(d, run)
}

func (s *stalledTransport) Subscribe(f func(string, []byte)) func() {
	return s.Transport.Subscribe(func(from string, frame []byte) {
		if wait, stalled := s.resumeAt(); stalled {
			frame = append([]byte(nil), frame...)
			s.net.AfterFunc(wait, func() { f(from, frame) })
			return
		}
		f(from, frame)
	})
}

// A node starved of CPU for 400 ms is not a partition: when it runs again
// it finds its peers' frames waiting, logs at most a WARN, and neither it
// nor its peers take it for cut off.
func TestAStalledNodeIsNotAPartition(t *testing.T) {
	net := memtransport.New()
	h := &countingHandler{counts: map[slog.Level]int{}}
	var stalled *stalledTransport
	var lims []*gopherpace.Limiter
	for _, name := range []string{"a", "b", "c"} {
		tr, _ := net.Join(name)
		var t2 gopherpace.Transport = tr
		logger := discardLogger
		if name == "a" {
			stalled = &stalledTransport{Transport: tr, net: net}
			t2, logger = stalled, slog.New(h)
		}
		l, err := gopherpace.New(gopherpace.WithRefillRate(1000), gopherpace.WithTransport(t2), gopherpace.WithLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lims = append(lims, l)
	}
	drive(net, lims, 2, 2*time.Second)
	stalled.stall(400 * time.Millisecond)
	during := drive(net, lims[1:], 2, 400*time.Millisecond) // a runs nothing
	got := drive(net, lims, 2, 2*time.Second)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts[slog.LevelError] != 0 {
		t.Fatalf("a stalled node logged %d ERROR records: %v", h.counts[slog.LevelError], h.counts)
	}
	if st := lims[0].Stats(); st.Partitioned || st.VisibleNodes != 3 {
		t.Fatalf("after the stall: %+v", st)
	}
	// The cluster stays within its bound: R·2.4 s, plus a tenth of B, over
	// the stall and the 2 s after it.
	if total := sum(during) + sum(got); total > 2400+100 || total < 2200 {
		t.Fatalf("admitted %d over the stall and the 2 s after, want 2200..2500: %v then %v", total, during, got)
	}
	t.Logf("log records %v; admitted during the stall %v, after it %v", h.counts, during, got)
}
