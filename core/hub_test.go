package gopherpace_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// sharedCluster starts nodes nodes with perNode limiters each on one
// transport per node (R = 1000/s each), and returns them by node.
func sharedCluster(t *testing.T, net *memtransport.Network, nodes, perNode int) [][]*gopherpace.Limiter {
	t.Helper()
	lims := make([][]*gopherpace.Limiter, nodes)
	for i := range nodes {
		tr, err := net.Join(fmt.Sprintf("n%d", i))
		if err != nil {
			t.Fatal(err)
		}
		for j := range perNode {
			l, err := gopherpace.New(gopherpace.WithRefillRate(1000), gopherpace.WithTransport(tr),
				gopherpace.WithLimiterID(fmt.Sprintf("route-%d", j)), gopherpace.WithLogger(discardLogger))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			lims[i] = append(lims[i], l)
		}
	}
	return lims
}

// datagramsPerNode runs the cluster for d in 1 ms steps, offering each
// limiter on each node load requests a millisecond as Poisson arrivals,
// and returns the datagrams and frame bytes one node sent a second, and
// what every limiter admitted.
func datagramsPerNode(t *testing.T, nodes, perNode int, load float64, d time.Duration) (datagrams, bytes float64, admitted []int) {
	net := memtransport.New(memtransport.WithLatency(time.Millisecond, 200*time.Microsecond))
	lims := sharedCluster(t, net, nodes, perNode)
	net.Advance(time.Second) // formed
	rng := rand.New(rand.NewPCG(1, 2))
	before := lims[0][0].Stats()
	var bytesBefore uint64
	for _, l := range lims[0] {
		bytesBefore += l.Stats().BytesSent
	}
	admitted = make([]int, perNode)
	for range int(d / time.Millisecond) {
		now := net.Now()
		for i := range lims {
			for j, l := range lims[i] {
				for range poissonCount(rng, load) {
					if ok, _ := l.AllowAt(now); ok {
						admitted[j]++
					}
				}
			}
		}
		net.Advance(time.Millisecond)
	}
	after := lims[0][0].Stats()
	var bytesAfter uint64
	for _, l := range lims[0] {
		bytesAfter += l.Stats().BytesSent
	}
	secs := d.Seconds()
	// A datagram goes to each of the other nodes.
	return float64(after.DatagramsSent-before.DatagramsSent) * float64(nodes-1) / secs, float64(bytesAfter-bytesBefore) * float64(nodes-1) / secs, admitted
}

func poissonCount(rng *rand.Rand, lambda float64) int {
	if lambda <= 0 {
		return 0
	}
	n, p, l := 0, 1.0, math.Exp(-lambda)
	for {
		p *= rng.Float64()
		if p <= l {
			return n
		}
		n++
	}
}

// Five limiters on one transport send one set of datagrams, not five, when
// idle: their heartbeats share every datagram. Under load (each at 3×R
// spread over the nodes) their reports share some, and each limiter still
// holds its own rate.
func TestLimitersOnATransportShareDatagrams(t *testing.T) {
	const nodes = 5
	idleOne, _, _ := datagramsPerNode(t, nodes, 1, 0, 2*time.Second)
	idleFive, _, _ := datagramsPerNode(t, nodes, 5, 0, 2*time.Second)
	t.Logf("idle: %.0f datagrams/s per node with one limiter, %.0f with five", idleOne, idleFive)
	if idleFive > idleOne*1.05 {
		t.Errorf("idle: five limiters sent %.0f datagrams/s per node, one sent %.0f: not shared", idleFive, idleOne)
	}
	perNodeLoad := 3.0 * 1000 / nodes / 1000 // requests a millisecond, per limiter per node
	busyOne, bytesOne, _ := datagramsPerNode(t, nodes, 1, perNodeLoad, 2*time.Second)
	busyFive, bytesFive, admitted := datagramsPerNode(t, nodes, 5, perNodeLoad, 2*time.Second)
	t.Logf("busy: %.0f datagrams/s and %.0f B/s per node with one limiter, %.0f and %.0f with five; admitted %v in 2 s",
		busyOne, bytesOne, busyFive, bytesFive, admitted)
	// Under load each limiter's reports follow its own admits (flushDelay
	// after the first), so they share a datagram only when they fall
	// within a millisecond of another limiter's; the ticks' always share.
	if busyFive > 2.5*busyOne {
		t.Errorf("busy: five limiters sent %.0f datagrams/s per node, one sent %.0f", busyFive, busyOne)
	}
	for j, n := range admitted {
		if n < 1980 || n > 2000+1000+20 { // R·t, plus the bucket at most
			t.Errorf("limiter %d admitted %d in 2 s, want about its own 2000", j, n)
		}
	}
}

// A limiter alone on its transport sends a tick's frames in one datagram:
// the resends of a keyed report ride with the tick's heartbeat. Over one
// keyed admit and four ticks: the report, four heartbeats and two resends
// of the report, seven frames in five datagrams (seven before).
func TestATicksFramesShareADatagram(t *testing.T) {
	net := memtransport.New(memtransport.WithRandom(4))
	lims := sharedCluster(t, net, 2, 1)
	l := lims[0][0]
	net.Advance(500 * time.Millisecond) // formed, and busy: not idle yet
	frames := func() (int64, int64) {
		st := l.Stats()
		return int64(st.FramesSent), int64(st.DatagramsSent)
	}
	f0, d0 := frames()
	if d, _ := l.TakeAt(net.Now(), "tenant", 1); !d.Allowed {
		t.Fatal("a fresh key denied")
	}
	net.Advance(200 * time.Millisecond) // the report, then four ticks: two resend it
	f1, d1 := frames()
	if f, d := f1-f0, d1-d0; f-d != 2 {
		t.Fatalf("%d frames in %d datagrams over the report and four ticks; want the two resends to share", f, d)
	}
}
