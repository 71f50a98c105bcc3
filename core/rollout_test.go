package gopherpace_test

import (
	"fmt"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// A rollout on a cluster: five simulated nodes at 100/s switch to 300/s
// (bucket 100 to 300) one by one, 200 ms apart. Nothing stalls meanwhile
// (no second admits less than the old rate), and from a second after the
// last node switched the cluster admits the new rate within ±2%. (In
// between, the replicas of the nodes that switched last still carry the
// debt their peers' faster admits left, repriced at the new rate.)
func TestRolloutOfANewRate(t *testing.T) {
	const nodes = 5
	net := memtransport.New(memtransport.WithRandom(21))
	var lims []*gopherpace.Limiter
	for i := range nodes {
		tr, err := net.Join(fmt.Sprint("n", i))
		if err != nil {
			t.Fatal(err)
		}
		l := limiterOf(t, gopherpace.WithRate(100, time.Second), gopherpace.WithTransport(tr), gopherpace.WithLogger(discardLogger))
		lims = append(lims, l)
	}
	const step = time.Millisecond
	perSecond := make([]int, 12)
	for s := range int(12 * time.Second / step) {
		at := time.Duration(s) * step
		// Node i switches at 5 s + i·200 ms.
		for i, l := range lims {
			if at == 5*time.Second+time.Duration(i)*200*time.Millisecond {
				if err := l.SetRate(300, time.Second, 300); err != nil {
					t.Fatal(err)
				}
			}
		}
		now := net.Now()
		for i, l := range lims {
			// Each node is offered 200/s: 1,000/s in all.
			if (s+i)%5 == 0 {
				if d, _ := l.TakeAt(now, "", 1); d.Allowed {
					perSecond[at/time.Second]++
				}
			}
		}
		net.Advance(step)
	}
	t.Logf("admitted per second: %v", perSecond)
	for sec := 1; sec < 5; sec++ {
		if got := perSecond[sec]; got < 98 || got > 102 {
			t.Errorf("second %d (old rate): %d, want 100±2", sec, got)
		}
	}
	for sec := 5; sec < 7; sec++ {
		if got := perSecond[sec]; got < 98 {
			t.Errorf("second %d (the rollout): %d, a stall below the old rate", sec, got)
		}
	}
	for sec := 7; sec < 12; sec++ {
		if got := perSecond[sec]; got < 294 || got > 306 {
			t.Errorf("second %d (every node on the new rate): %d, want 300±2%%", sec, got)
		}
	}
}
