package gopherpace

import (
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/datagram"
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
	id := wire.NameHash(0, DefaultLimiterID)
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

// TestTruncatedTotals: a tagged entry's running totals, sent as their low
// bits, are widened from the last totals this node heard
// of the stream, so that they charge exactly what the totals in full
// would have: across a wrap of the low bits, duplicated, late, and at
// each width; and they are dropped (counted as stale) when the stream was
// last heard over TotalsHorizon ago, when no recent total is left to
// widen from. The origin is older than this node, so its first entry
// charges only its own admits (receiver.globalCharge).
func TestTruncatedTotals(t *testing.T) {
	l, tr, _, others := groupedCrowd(t)
	origin, relay := others[0], others[1]
	id := wire.NameHash(0, DefaultLimiterID)
	inc := uint64(tr.now.UnixNano()) - uint64(time.Hour)
	const base = 3<<21 - 30 // a long-running origin's total, 30 short of a wrap of 21, 14 and 7 bits
	send := func(bits uint8, sum uint64) {
		t.Helper()
		e := wire.Entry{Origin: wire.OriginHash(origin), Tagged: bits != 0, Tag: wire.IncarnationTag(inc), GlobalBits: bits, DemandBits: bits}
		if bits == 0 {
			e.Tagged = false
		}
		f := wire.Frame{Incarnation: inc, GlobalSum: sum, Global: 1, DemandSum: 2 * sum}
		tr.receive(relay, wire.AppendDigest(nil, true, id, wire.AppendDigestEntry(nil, e, &f)))
	}
	charged := func() uint64 { return l.Stats().TokensCharged }
	stale := func() uint64 { return l.Stats().FramesDuplicate }
	steps := []struct {
		name              string
		bits              uint8
		sum               uint64
		charge, staleMore uint64
	}{
		{"whole, in full: its own admit only (an older peer)", 0, base, 1, 0},
		{"14 bits, across a wrap", 14, base + 40, 40, 0},
		{"7 bits", 7, base + 45, 5, 0},
		{"7 bits, again (a second relay's copy)", 7, base + 45, 0, 0},
		{"14 bits, late: behind the last", 14, base + 42, 0, 0},
		{"21 bits", 21, base + 100, 55, 0},
		{"in full again", 0, base + 101, 1, 0},
	}
	for _, s := range steps {
		c0, s0 := charged(), stale()
		send(s.bits, s.sum)
		if got := charged() - c0; got != s.charge {
			t.Errorf("%s: charged %d, want %d", s.name, got, s.charge)
		}
		if got := stale() - s0; got != s.staleMore {
			t.Errorf("%s: %d more stale, want %d", s.name, got, s.staleMore)
		}
	}
	// Silent past the horizon: the last total may be older than the
	// relay's width allows for, so a truncated entry is not widened.
	tr.now = tr.now.Add(time.Duration(datagram.TotalsHorizon(int64(engineOf(l).Tick()))) + time.Millisecond)
	c0, s0 := charged(), stale()
	send(7, base+110)
	if charged() != c0 || stale() != s0+1 {
		t.Errorf("after silence past the horizon: charged %d, %d more stale; want none and 1", charged()-c0, stale()-s0)
	}
	// A total whose widening would fall below zero is not the stream's.
	if v, ok := wire.Widen(120, 7, 5); ok {
		t.Errorf("Widen(120, 7, 5) = %d, true; want below zero refused", v)
	}
}
