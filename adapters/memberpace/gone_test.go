package memberpace

import (
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/seeds"
)

// crash stops tr as a killed process stops: no Leave and no goodbye, its
// ports closed. Close afterwards does nothing.
func crash(tr *Transport) {
	tr.closeOnce.Do(func() {
		tr.stop()
		tr.rejoinDone.Wait()
		tr.logw.closing.Store(true)
		tr.closeErr = tr.ml.Shutdown()
		close(tr.done)
		tr.dispatchDone.Wait()
		tr.departed.stop()
	})
}

func allHeard(t *testing.T, lims []*gopherpace.Limiter) {
	t.Helper()
	eventually(t, 5*time.Second, "every limiter hears the others", func() bool {
		for _, l := range lims {
			if l.Stats().HeardNodes != int64(len(lims)) {
				return false
			}
		}
		return true
	})
}

// Two processes of three crash: their ports refuse connections, so the
// survivor, a strict minority, knows them gone within a tick or two of
// their silence (its limiter asks, the transport probes), without waiting
// for memberlist's failure detector, and stops counting them: it serves
// the whole rate, not its third of it.
func TestCrashedMembersAreGoneForGood(t *testing.T) {
	nodes := threeNodes(t)
	lims := limiters(t, nodes, gopherpace.WithRefillRate(100))
	allHeard(t, lims)
	crash(nodes[1])
	crash(nodes[2])
	crashed := time.Now()
	eventually(t, 15*time.Second, "the survivor counts itself alone", func() bool {
		st := lims[0].Stats()
		return st.KnownNodes == 1 && !st.Partitioned
	})
	t.Logf("the survivor stopped counting both %v after the crash", time.Since(crashed).Round(time.Millisecond))
	for _, n := range []string{"n1", "n2"} {
		if !nodes[0].Gone(n) {
			t.Errorf("%s crashed, and its port refuses connections, but is not reported gone", n)
		}
	}
}

// A member cut off by a partition answers nothing from across it, so it
// is never reported gone, however long memberlist holds it dead, and the
// node on its own keeps counting the others, serving its share (the share
// policy) until the heal.
func TestAPartitionIsNoEvidenceOfDeparture(t *testing.T) {
	var bl [3]*blockable
	a := node(t, "p0", withBlockable(t, &bl[0]))
	s := WithSeeds(seeds.Static{a.GossipAddr()})
	b := node(t, "p1", s, withBlockable(t, &bl[1]))
	c := node(t, "p2", s, withBlockable(t, &bl[2]))
	nodes := []*Transport{a, b, c}
	eventually(t, 5*time.Second, "3 members", func() bool { return len(a.Members()) == 2 && len(c.Members()) == 2 })
	lims := limiters(t, nodes, gopherpace.WithRefillRate(100))
	allHeard(t, lims)
	bl[2].block("*")
	bl[0].block(c.GossipAddr())
	bl[1].block(c.GossipAddr())
	eventually(t, 10*time.Second, "memberlist on each side declares the other dead", func() bool {
		return len(a.Members()) == 1 && len(c.Members()) == 0
	})
	// The probes of a partitioned member reach nothing that refuses. The
	// blockable transport drops memberlist's own traffic only; the probe
	// dials the real port, which accepts: no evidence either way.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if c.Gone("p0") || c.Gone("p1") || a.Gone("p2") {
			t.Fatal("a partitioned member was reported gone for good")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := lims[2].Stats(); st.KnownNodes != 3 {
		t.Fatalf("the cut-off node stopped counting the others (%d known): it would take the whole rate", st.KnownNodes)
	}
}
