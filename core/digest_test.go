package gopherpace

import (
	"testing"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// A tagged digest entry is charged to the stream whose incarnation has
// its tag, once the node has heard that incarnation whole; before, or
// with a tag of no incarnation heard, it is dropped and counted as
// stale, and its totals arrive with the next entry. After a restart the
// tags of the old and the new incarnation each find their own stream.
func TestTaggedEntries(t *testing.T) {
	l, tr, _, others := groupedCrowd(t)
	origin, relay := others[0], others[1]
	id := hashKey(0, DefaultLimiterID)
	first := uint64(tr.now.UnixNano())
	restarted := first + 1_000_000_000
	send := func(tagged bool, inc, sum uint64) {
		t.Helper()
		e := wire.Entry{Origin: wire.OriginHash(origin), Tagged: tagged, Tag: wire.IncarnationTag(inc)}
		entry := wire.AppendDigestEntry(nil, e, &wire.Frame{Incarnation: inc, GlobalSum: sum, Global: 1, DemandSum: sum})
		tr.receive(relay, wire.AppendDigest(nil, true, id, entry))
	}
	charged := func() uint64 { return l.Stats().TokensCharged }
	stale := func() uint64 { return l.Stats().FramesDuplicate }
	steps := []struct {
		name              string
		tagged            bool
		inc, sum          uint64
		charge, staleMore uint64
	}{
		{"tagged before any whole entry", true, first, 4, 0, 1},
		{"the first whole entry: its whole total (a peer as old as this node)", false, first, 5, 5, 0},
		{"tagged: the growth", true, first, 9, 4, 0},
		{"a tag of no incarnation heard", true, first + 7, 20, 0, 1},
		{"whole, after a restart", false, restarted, 2, 2, 0},
		{"tagged, the new incarnation", true, restarted, 6, 4, 0},
		{"tagged, the old incarnation, late", true, first, 10, 1, 0},
	}
	if wire.IncarnationTag(first) == wire.IncarnationTag(restarted) || wire.IncarnationTag(first+7) == wire.IncarnationTag(first) {
		t.Fatal("the test's incarnations share a tag")
	}
	for _, s := range steps {
		c0, s0 := charged(), stale()
		send(s.tagged, s.inc, s.sum)
		if got := charged() - c0; got != s.charge {
			t.Errorf("%s: charged %d, want %d", s.name, got, s.charge)
		}
		if got := stale() - s0; got != s.staleMore {
			t.Errorf("%s: %d more stale, want %d", s.name, got, s.staleMore)
		}
	}
}
