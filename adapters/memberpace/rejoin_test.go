package memberpace

import (
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/seeds"
)

// A partition heals within a second or two of the links coming back, on
// both sides, whatever the seeds say: here the node cut off has no seeds
// at all (the first of a fleet), and the others re-join their seeds only
// every 10 s. The members that memberlist declared dead without evidence
// that they are gone are joined again every second.
func TestAHealedPartitionRemergesWithoutSeeds(t *testing.T) {
	var bl [3]*blockable
	// The default profile: the fast one's 100 ms probe timeout takes live
	// members for dead on a loaded machine, which is not what this test
	// is about.
	lan := WithProfile(ProfileLAN)
	a := node(t, "q0", lan, withBlockable(t, &bl[0]))
	s := WithSeeds(seeds.Static{a.GossipAddr()})
	b := node(t, "q1", lan, s, withBlockable(t, &bl[1]))
	c := node(t, "q2", lan, s, withBlockable(t, &bl[2]))
	nodes := []*Transport{a, b, c}
	eventually(t, 10*time.Second, "3 members", func() bool { return len(a.Members()) == 2 && len(c.Members()) == 2 })
	lims := limiters(t, nodes, gopherpace.WithRefillRate(100))
	whole := func() bool {
		for i, l := range lims {
			if l.Stats().HeardNodes != 3 || len(nodes[i].Members()) != 2 {
				return false
			}
		}
		return true
	}
	eventually(t, 2*time.Second, "limiters hear each other", whole)

	bl[0].block(b.GossipAddr(), c.GossipAddr())
	bl[1].block(a.GossipAddr())
	bl[2].block(a.GossipAddr())
	eventually(t, 30*time.Second, "both sides drop each other", func() bool {
		return len(a.Members()) == 0 && len(b.Members()) == 1 && len(c.Members()) == 1
	})
	for _, x := range bl {
		x.block()
	}
	healed := time.Now()
	eventually(t, 3*time.Second, "re-merged after the heal", func() bool {
		if whole() {
			return true
		}
		if time.Since(healed) > 2900*time.Millisecond {
			for i, l := range lims {
				t.Logf("%s: members %v, heard %d", nodes[i].Name(), nodes[i].Members(), l.Stats().HeardNodes)
			}
		}
		return false
	})
	t.Logf("re-merged %v after the heal", time.Since(healed).Round(time.Millisecond))
}
