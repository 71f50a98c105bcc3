package rate_test

import (
	"fmt"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
	"github.com/pedreviljoen/gopherpace/core/rate"
)

func clustered(t *testing.T, net *memtransport.Network, nodes int, r rate.Limit, b int) []*rate.Limiter {
	t.Helper()
	var lims []*rate.Limiter
	for i := range nodes {
		tr, err := net.Join(fmt.Sprintf("n%d", i))
		if err != nil {
			t.Fatal(err)
		}
		lim, err := rate.Build(r, b, rate.Clustered(tr, gopherpace.WithLimiterID("api")))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lim.Close() })
		lims = append(lims, lim)
	}
	net.Advance(time.Second) // membership settles
	return lims
}

// Three processes with one clustered Limiter each share one bucket: what
// all of them allow over a span is what one standalone Limiter would.
func TestClusteredLimitersShareOneBucket(t *testing.T) {
	net := memtransport.New()
	lims := clustered(t, net, 3, 50, 20)
	allowed := 0
	const span = 5 * time.Second
	for range int(span / time.Millisecond) {
		now := net.Now()
		for _, l := range lims {
			if l.AllowN(now, 1) {
				allowed++
			}
		}
		net.Advance(time.Millisecond)
	}
	// R·t + B = 50·5 + 20 = 270; every node asked for 3,000/s.
	if allowed > 270 || allowed < 260 {
		t.Fatalf("3 clustered nodes allowed %d over 5 s at 50/s with a burst of 20, want about 270 and never more", allowed)
	}
	if lims[0].Cluster() == nil || len(lims[0].Cluster().Peers()) != 2 {
		t.Fatal("Cluster does not expose the gopherpace Limiter and its peers")
	}
}

// A clustered reservation books ahead on the cluster's bucket, one
// window at most; the peers see the booking.
func TestClusteredReservationsBookAhead(t *testing.T) {
	net := memtransport.New()
	lims := clustered(t, net, 2, 10, 10) // a window of 1 s
	start := net.Now()
	r := lims[0].ReserveN(start, 4)
	if !r.OK() || r.DelayFrom(start) != 0 {
		t.Fatalf("a reservation a full bucket covers: ok %v delay %v", r.OK(), r.DelayFrom(start))
	}
	r.CancelAt(start)
	if got := lims[0].TokensAt(start); got != 10 {
		t.Fatalf("tokens %v after cancelling the reservation, want 10", got)
	}
	// Spend the bucket from both nodes, letting each report land.
	for _, l := range lims {
		for range 5 {
			if !l.AllowN(net.Now(), 1) {
				t.Fatal("a full bucket refused")
			}
		}
		net.Advance(50 * time.Millisecond) // the reports land
	}
	now := net.Now() // 10 spent, 1 refilled
	ahead := lims[1].ReserveN(now, 5)
	if !ahead.OK() || ahead.DelayFrom(now) < 350*time.Millisecond || ahead.DelayFrom(now) > 410*time.Millisecond {
		t.Fatalf("a booking of 5 with about 1 token left at 10/s: ok %v due in %v, want about 400ms", ahead.OK(), ahead.DelayFrom(now))
	}
	net.Advance(20 * time.Millisecond)
	now = net.Now()
	if got := lims[0].TokensAt(now); got > -3 {
		t.Fatalf("the peer reads %v tokens after the booking, want the debt (about -3.8)", got)
	}
	if r := lims[0].ReserveN(now, 10); r.OK() {
		t.Fatalf("a booking more than one window ahead was OK, due in %v", r.DelayFrom(now))
	}
	// A cancel gives the tokens back to this node's replica; its report
	// has gone out, and peers never add tokens on a frame's say-so.
	before := lims[1].TokensAt(now)
	ahead.CancelAt(now)
	if got := lims[1].TokensAt(now); got < before+4.5 {
		t.Fatalf("the booking node reads %v tokens after the cancel, %v before: want the 5 back", got, before)
	}
}

func TestClusteredSpecialLimits(t *testing.T) {
	net := memtransport.New()
	lims := clustered(t, net, 2, 10, 5)
	now := net.Now()
	if lims[0].AllowN(now, 6) || lims[0].ReserveN(now, 6).OK() {
		t.Fatal("more than the burst was allowed")
	}
	lims[0].SetLimitAt(now, rate.Inf)
	if !lims[0].AllowN(now, 1000) {
		t.Fatal("Inf refused")
	}
	lims[0].SetLimitAt(now, 0)
	if lims[0].AllowN(now, 1) {
		t.Fatal("a zero limit allowed")
	}
	lims[0].SetLimitAt(now, 20)
	lims[0].SetBurstAt(now, 40)
	if tokens, per := lims[0].Cluster().Rate(); tokens != 20 || per != time.Second || lims[0].Cluster().BucketSize() != 40 {
		t.Fatalf("the cluster's rule is %d per %v, size %d; want 20/s, 40", tokens, per, lims[0].Cluster().BucketSize())
	}
}

func TestClusteredNeedsATransport(t *testing.T) {
	if _, err := rate.Build(10, 1, rate.Clustered(nil)); err == nil {
		t.Fatal("Clustered(nil) built")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("NewLimiter with a bad option did not panic")
		}
	}()
	rate.NewLimiter(10, 1, rate.Clustered(nil))
}
