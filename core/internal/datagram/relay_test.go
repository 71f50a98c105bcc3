package datagram

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// A relay's entries, as a stream's totals grow at rates that jump every
// second (a burst, a lull, an idle stretch), widen back exactly at any
// receiver whose last total is up to two horizons older than the entry's
// (the oldest TotalsHorizon lets a receiver widen from); the relay
// truncates only once it has kept the stream for totalsEvery, sends a
// stream whole for its first wholeSettle and for wholeSettle after a
// change of the members (wholeAgain), and whole at least every
// wholeEvery between.
func TestRelayTruncatesWithinReach(t *testing.T) {
	const tick = int64(100 * time.Millisecond)
	quiet := quietEvery(tick)
	rng := rand.New(rand.NewPCG(1, 2))
	var r relays
	s := relayStream{origin: "a", limiter: 1}
	type sent struct {
		at             int64
		global, demand uint64
	}
	var history []sent // the true totals by time, as the origin sent them
	global, demand := uint64(1<<30), uint64(1<<31)
	var rate uint64
	truncated, lastWhole, changeAt := 0, int64(0), int64(-1)
	for step := int64(0); step < 600; step++ {
		now := step * tick
		if step%10 == 0 {
			rate = []uint64{0, 1, 30, 1000, 5000}[rng.IntN(5)]
		}
		if step == 300 {
			r.wholeAgain(now)
			changeAt = now
		}
		add := rate * uint64(rng.IntN(3)) / 2
		global += add
		demand += 3 * add
		history = append(history, sent{now, global, demand})
		r.keepLatest(s, &wire.Frame{Incarnation: 7, GlobalSum: global, Global: int64(add), DemandSum: demand}, now, tick)
		r.dueLatest("b", now, quiet, 1400)
		for b := r.toGroups; len(b) > 0; {
			piece, rest, err := wire.Next(b)
			if err != nil {
				t.Fatal(err)
			}
			b = rest
			d, _ := wire.OpenDigest(piece)
			var f wire.Frame
			e, _, _ := wire.NextEntry(d.Entries, &f)
			inSettle := now < wholeSettle() || changeAt >= 0 && now-changeAt < wholeSettle()
			switch {
			case !e.Tagged:
				lastWhole = now
			case inSettle:
				t.Fatalf("at %v: a tagged entry within wholeSettle of a start or a change", time.Duration(now))
			case now-lastWhole > wholeEvery(quiet):
				t.Fatalf("at %v: no whole entry for %v", time.Duration(now), time.Duration(now-lastWhole))
			}
			if e.GlobalBits == 0 && e.DemandBits == 0 {
				continue
			}
			truncated++
			if now < totalsEvery(tick) {
				t.Fatalf("at %v: truncated before the relay kept the stream for totalsEvery", time.Duration(now))
			}
			// Every receiver's last total, from the entry's own to one two
			// horizons older, widens it to the truth.
			for _, h := range history {
				if now-h.at > 2*TotalsHorizon(tick) {
					continue
				}
				g, demandOK := f.GlobalSum, true
				if e.GlobalBits != 0 {
					g, _ = wire.Widen(f.GlobalSum, e.GlobalBits, h.global)
				}
				dm := f.DemandSum
				if e.DemandBits != 0 {
					dm, demandOK = wire.Widen(f.DemandSum, e.DemandBits, h.demand)
				}
				if g != global || dm != demand || !demandOK {
					t.Fatalf("at %v, from a total of %v before: widened %d and %d, want %d and %d (widths %d, %d)",
						time.Duration(now), time.Duration(now-h.at), g, dm, global, demand, e.GlobalBits, e.DemandBits)
				}
			}
		}
		r.sent()
	}
	if truncated < 100 {
		t.Fatalf("only %d entries truncated", truncated)
	}
}
