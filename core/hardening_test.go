package gopherpace_test

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// Each test here is an attack that worked once: docs/security.md has the
// threat model, and each hole's figures before and after.

// Counts so large that count × (ns per token) overflows int64 must charge a
// full bucket of debt, never wrap around into a refill.
func TestHugeCountsNeverRefill(t *testing.T) {
	const rate, bucketSize = 1000, 1000
	unit := uint64(time.Second / rate)
	wraps := uint64(math.MaxInt64)/unit + 1 // × unit just passes 2^63
	for _, tc := range []struct {
		name  string
		frame func(inc uint64) gopherpace.TestFrame
		keyed bool
	}{
		{"global count", func(inc uint64) gopherpace.TestFrame {
			return gopherpace.TestFrame{Incarnation: inc, GlobalSum: wraps, Global: wraps}
		}, false},
		{"global running total", func(inc uint64) gopherpace.TestFrame {
			return gopherpace.TestFrame{Incarnation: inc, GlobalSum: math.MaxUint64}
		}, false},
		{"keyed count", func(inc uint64) gopherpace.TestFrame {
			return gopherpace.TestFrame{Incarnation: inc, Seq: 1, Keys: []string{"k"}, KeyTokens: []uint64{wraps}}
		}, true},
		{"keyed count at the wire's limit", func(inc uint64) gopherpace.TestFrame {
			return gopherpace.TestFrame{Incarnation: inc, Seq: 1, Keys: []string{"k"}, KeyTokens: []uint64{1 << 60}}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			net := memtransport.New()
			lims, taps := tappedCluster(t, net, 2, gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(bucketSize))
			net.Advance(time.Second)
			a := lims[0]
			key := ""
			if tc.keyed {
				key = "k"
			}
			at := net.Now()
			for {
				if d, _ := a.TakeAt(at, key, 1); !d.Allowed {
					break
				}
			}
			net.Advance(10 * time.Millisecond) // the peer hears a's admits
			// n1's frames name its real incarnation: the attacker copies it.
			inc := taps[0].incarnationOf("n1")
			taps[0].inject("n1", gopherpace.EncodeTestFrame(tc.frame(inc)))
			admitted := 0
			for range 200 {
				now := net.Now()
				for range 50 {
					if d, _ := a.TakeAt(now, key, 1); d.Allowed {
						admitted++
					}
				}
				net.Advance(time.Millisecond)
			}
			// Empty at the start: in 200 ms at most 200 tokens refill.
			t.Logf("admitted %d in 200 ms after the frame", admitted)
			if admitted > rate/5+2 {
				t.Fatalf("admitted %d in 200 ms from an empty bucket after a crafted frame; refill allows %d", admitted, rate/5)
			}
		})
	}
}

// A frame claiming a peer's name with a later incarnation must not make the
// peer's real frames count as stale: that would stop charging its admits,
// and the cluster would admit N×R.
func TestSpoofedIncarnationCannotMuteAPeer(t *testing.T) {
	for _, tc := range []struct {
		name string
		inc  func(real uint64) uint64
	}{
		{"the largest incarnation", func(uint64) uint64 { return math.MaxUint64 }},
		{"an hour ahead", func(real uint64) uint64 { return real + uint64(time.Hour) }},
		{"just ahead", func(real uint64) uint64 { return real + 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const rate = 1000
			net := memtransport.New()
			lims, taps := tappedCluster(t, net, 2, gopherpace.WithRefillRate(rate))
			drive(net, lims, 2, time.Second)
			// Each node hears spoofed frames under the other's name, once a
			// second for as long as the attack lasts.
			spoofOf := func(at int, from string) []byte {
				return gopherpace.EncodeTestFrame(gopherpace.TestFrame{Incarnation: tc.inc(taps[at].incarnationOf(from)), GlobalSum: 1})
			}
			spoofs := [][]byte{spoofOf(0, "n1"), spoofOf(1, "n0")}
			admitted := 0
			for range 5 {
				taps[0].inject("n1", spoofs[0])
				taps[1].inject("n0", spoofs[1])
				admitted += sum(drive(net, lims, 2, time.Second))
			}
			// Both nodes offer 2R; the cluster may admit R·5s, plus at most a
			// tenth of the bucket for gossip delay.
			t.Logf("admitted %d in 5 s", admitted)
			if limit := rate*5 + rate/10; admitted > limit {
				t.Fatalf("admitted %d in 5 s under a spoofed incarnation, over R·t + B/10 = %d", admitted, limit)
			}
		})
	}
}

// Frames from names the transport does not list as members are never
// applied (they are held for 2 s in case the sender is a member that just
// joined, then dropped): invented names neither shrink a node's share of
// the rate nor close it.
func TestInventedSendersAreIgnored(t *testing.T) {
	t.Run("a lone fail-closed node stays open", func(t *testing.T) {
		net := memtransport.New()
		lims, taps := tappedCluster(t, net, 1, gopherpace.WithRefillRate(100), gopherpace.WithPartitionPolicy(gopherpace.PartitionFailClosed))
		net.Advance(time.Second)
		taps[0].inject("ghost", gopherpace.EncodeTestFrame(gopherpace.TestFrame{Incarnation: uint64(net.Now().UnixNano())}))
		net.Advance(time.Second)
		if ok, _ := lims[0].AllowAt(net.Now()); !ok {
			t.Fatal("one frame from an invented name closed a lone node")
		}
		net.Advance(2 * time.Second) // past the hold for senders not listed yet
		if st := lims[0].Stats(); st.KnownNodes != 1 || st.FramesNotMember != 1 {
			t.Fatalf("stats %+v: want 1 known node and 1 frame from a non-member", st)
		}
	})
	t.Run("300 names leave a cluster's rate alone", func(t *testing.T) {
		const rate = 1000
		net := memtransport.New()
		lims, taps := tappedCluster(t, net, 3, gopherpace.WithRefillRate(rate))
		drive(net, lims, 2, time.Second)
		for i := range 300 {
			for _, tap := range taps {
				tap.inject(fmt.Sprint("ghost-", i), gopherpace.EncodeTestFrame(gopherpace.TestFrame{Incarnation: uint64(net.Now().UnixNano())}))
			}
		}
		got := sum(drive(net, lims, 2, 3*time.Second))
		t.Logf("admitted %d in 3 s", got)
		if got < rate*3*95/100 {
			t.Fatalf("admitted %d in 3 s after 300 invented senders, want about %d", got, rate*3)
		}
		if st := lims[0].Stats(); st.KnownNodes != 3 {
			t.Fatalf("known nodes %d, want 3", st.KnownNodes)
		}
	})
}

// Every time a caller can pass gives a safe decision: no hang, no extra
// admits, and afterwards a stall of a few windows at most.
func TestExtremeTimes(t *testing.T) {
	net := memtransport.New()
	tr, _ := net.Join("a")
	net.Join("b")
	for _, clustered := range []bool{false, true} {
		opts := []gopherpace.Option{gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(10), gopherpace.WithLogger(discardLogger)}
		if clustered {
			opts = append(opts, gopherpace.WithTransport(tr))
		}
		l, err := gopherpace.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		extremeTimes(t, net, l, clustered)
	}
}

func extremeTimes(t *testing.T, net *memtransport.Network, l *gopherpace.Limiter, clustered bool) {
	within := func(t *testing.T, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("did not return")
		}
	}
	now := net.Now()
	for _, at := range []time.Time{{}, time.Unix(0, math.MinInt64), time.Unix(1<<62, 0), now.AddDate(300, 0, 0), now.AddDate(-300, 0, 0),
		now.AddDate(5, 0, 0), now.AddDate(-5, 0, 0)} {
		t.Run(fmt.Sprintf("clustered=%v/%v", clustered, at), func(t *testing.T) {
			for _, key := range []string{"", "k"} {
				admitted := 0
				within(t, func() {
					for range 1000 {
						if d, _ := l.TakeAt(at, key, 1); d.Allowed {
							admitted++
						}
					}
				})
				if admitted > 10 {
					t.Fatalf("key %q: admitted %d of 1000 at one instant from a bucket of 10", key, admitted)
				}
				// Back on the clock: no hang, and tokens again within a few
				// windows (1 s each). Clustered, a node may spend only its
				// share of the bucket before its peers hear of it: a token
				// will do.
				within(t, func() { l.TakeAt(net.Now(), key, 1) })
				want := int64(10)
				if clustered {
					want = 1
				}
				start := net.Now()
				for {
					if d, _ := l.TakeAt(net.Now(), key, want); d.Allowed {
						break
					}
					if stall := net.Now().Sub(start); stall > 3*time.Second {
						t.Fatalf("key %q: still empty %v after a call at %v", key, stall, at)
					}
					net.Advance(10 * time.Millisecond)
				}
			}
		})
	}
}

// Two limiters cannot share a transport under one ID: the second would
// take the first's frames for its own, and neither would hold its limit.
func TestDuplicateLimiterIDOnATransport(t *testing.T) {
	net := memtransport.New()
	tr, _ := net.Join("a")
	first, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithTransport(tr), gopherpace.WithLogger(discardLogger))
	if err != nil {
		t.Fatal(err)
	}
	_, err = gopherpace.New(gopherpace.WithRefillRate(5), gopherpace.WithTransport(tr), gopherpace.WithLogger(discardLogger))
	if err == nil || !strings.Contains(err.Error(), "WithLimiterID") {
		t.Fatalf("a second limiter under the same ID: err %v, want one that says to use WithLimiterID", err)
	}
	other, err := gopherpace.New(gopherpace.WithRefillRate(5), gopherpace.WithTransport(tr), gopherpace.WithLimiterID("per-route"), gopherpace.WithLogger(discardLogger))
	if err != nil {
		t.Fatalf("a distinct ID: %v", err)
	}
	other.Close()
	first.Close()
	again, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithTransport(tr), gopherpace.WithLogger(discardLogger))
	if err != nil {
		t.Fatalf("the ID is free again after Close: %v", err)
	}
	again.Close()
}

// failingTransport refuses every frame.
type failingTransport struct{ *memtransport.Transport }

func (failingTransport) Broadcast([]byte) error { return fmt.Errorf("network unreachable") }

// Frames the transport refuses are counted and logged, at a bounded rate.
func TestSendFailuresAreCountedAndLogged(t *testing.T) {
	net := memtransport.New()
	tr, _ := net.Join("a") // alone: no partition to log besides the refusals
	h := &countingHandler{counts: map[slog.Level]int{}}
	l, err := gopherpace.New(gopherpace.WithRefillRate(1000), gopherpace.WithTransport(failingTransport{tr}), gopherpace.WithLogger(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	drive(net, []*gopherpace.Limiter{l}, 5, 65*time.Second)
	st := l.Stats()
	if st.SendFailures < 1000 || st.FramesSent != 0 {
		t.Fatalf("stats %+v: want over 1000 send failures and no frames sent", st)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := h.counts[slog.LevelWarn]; n < 1 || n > 3 {
		t.Fatalf("%d WARN records for 65 s of failing sends, want 1 to 3 (one per 30 s)", n)
	}
}
