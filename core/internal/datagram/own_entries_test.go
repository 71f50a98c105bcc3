package datagram

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// A node's frames of running totals go to its mates as entries: whole at
// first, tagged and truncated once the stream has settled, each the frame
// it stands for when read back; at the head of the first digest of their
// limiter that goes to the mates anyway, or in a digest of their own
// ahead of the rest; keyed frames and envelopes go as they were.
func TestOwnEntriesForMates(t *testing.T) {
	const tick = int64(50 * time.Millisecond)
	const l1, l2 = uint64(0x1111), uint64(0x2222)
	inc := uint64(1_700_000_000_000_000_000)
	heartbeat := func(limiter, sum uint64) wire.Frame {
		return wire.Frame{Limiter: limiter, Incarnation: inc, GlobalSum: sum, Global: 2, DemandSum: 3 * sum, Level: -17, Withheld: 9}
	}
	keyed := wire.Frame{Limiter: l1, Incarnation: inc, Seq: 4, GlobalSum: 10, Keys: []wire.KeyCount{{Key: 7, Tokens: 1}}}
	// Another group's digest of l1, on its last hop, and an envelope.
	var relayed []byte
	other := wire.Frame{Incarnation: 5, GlobalSum: 40, Global: 1, DemandSum: 41}
	for _, name := range []string{"far-1", "far-2"} {
		relayed = wire.AppendDigestEntry(relayed, wire.Entry{Origin: wire.OriginHash(name)}, &other)
	}
	envelope := wire.AppendRelay(nil, "far-3", true, wire.Encode(nil, &keyed))
	toMates := append(wire.AppendDigest(nil, true, l1, relayed), envelope...)

	var o ownEntries
	truncated := false
	var lastWhole [2]int64
	for step, now := 0, int64(0); step < 120; step, now = step+1, now+tick {
		sum := uint64(1<<30 + 37*step) // a long-running node's
		f1, f2 := heartbeat(l1, sum), heartbeat(l2, sum+1)
		var pending []byte
		pending = wire.Encode(pending, &f1)
		pending = wire.Encode(pending, &keyed)
		pending = wire.Encode(pending, &f2)
		frameBytes := len(wire.Encode(nil, &f1))
		o.split("me", pending, now, tick, 0)
		if want := wire.Encode(nil, &keyed); !bytes.Equal(o.keyed, want) {
			t.Fatalf("step %d: the keyed frames went as %x, want %x", step, o.keyed, want)
		}
		out := o.merge(toMates, 1350)
		// l2's own digest first, then l1's digest with this node's entry
		// at its head, then the envelope.
		var pieces [][]byte
		for b := out; len(b) > 0; {
			p, rest, err := wire.Next(b)
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			pieces, b = append(pieces, p), rest
		}
		if len(pieces) != 3 || !bytes.Equal(pieces[2], envelope) {
			t.Fatalf("step %d: %d pieces, the last %x; want 3, the envelope last", step, len(pieces), pieces[len(pieces)-1])
		}
		for i, want := range []struct {
			limiter uint64
			own     wire.Frame
			others  int
		}{{l2, f2, 0}, {l1, f1, 2}} {
			d, err := wire.OpenDigest(pieces[i])
			if err != nil || d.Limiter != want.limiter || !d.Spread {
				t.Fatalf("step %d, piece %d: %+v, %v; want a digest of %x on its last hop", step, i, d, err, want.limiter)
			}
			var got wire.Frame
			e, rest, _ := wire.NextEntry(d.Entries, &got)
			if e.Origin != wire.OriginHash("me") {
				t.Fatalf("step %d, piece %d: the first entry is of %x, not this node's", step, i, e.Origin)
			}
			// Whole while the stream settles, then at least every
			// wholeEvery.
			whole := now < wholeSettle() || now-lastWhole[i] >= wholeEvery(quietEvery(tick))
			if e.Tagged == whole {
				t.Fatalf("step %d: entry tagged %v at %v (last whole at %v)", step, e.Tagged, time.Duration(now), time.Duration(lastWhole[i]))
			}
			if whole {
				lastWhole[i] = now
			}
			if e.Tagged {
				if e.Tag != wire.IncarnationTag(inc) {
					t.Fatalf("step %d: tag %x", step, e.Tag)
				}
				got.Incarnation = inc
				last := want.own.GlobalSum - 37 // the mates' last total, a heartbeat ago
				if !widen(&got.GlobalSum, e.GlobalBits, last) || !widen(&got.DemandSum, e.DemandBits, 3*last) {
					t.Fatalf("step %d: the totals did not widen", step)
				}
				truncated = truncated || e.GlobalBits != 0
				if size := len(d.Entries) - len(rest); size > frameBytes-10 {
					t.Fatalf("step %d: a tagged entry of %d bytes for a frame of %d", step, size, frameBytes)
				}
			}
			got.Limiter, got.Keys = want.limiter, nil
			if !reflect.DeepEqual(got, want.own) {
				t.Fatalf("step %d, piece %d: read back %+v, want %+v", step, i, got, want.own)
			}
			n := 0
			for b := rest; len(b) > 0; n++ {
				var f wire.Frame
				if _, b, err = wire.NextEntry(b, &f); err != nil {
					t.Fatal(err)
				}
			}
			if n != want.others {
				t.Fatalf("step %d, piece %d: %d entries of others, want %d", step, i, n, want.others)
			}
		}
	}
	if !truncated {
		t.Fatal("no entry went with its totals truncated")
	}
}
