package gopherpace

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// Golden values pin what every node of a cluster must compute alike. A
// change to either breaks a cluster that runs two versions during a
// rolling deploy: change them only together with the wire version, and
// say so in the release notes.

// TestKeyHashGolden pins hashKey: nodes that hash a key differently keep
// different buckets for it and never charge each other's admits.
func TestKeyHashGolden(t *testing.T) {
	for _, tc := range []struct {
		key    string
		secret uint64
		want   uint64
	}{
		{"", 0, 0xef46db3751d8e999},
		{"", 0xfeedface, 0x9e4890353cfa0455},
		{"a", 0, 0xd24ec4f1a98c6e5b},
		{"a", 0xfeedface, 0x40362a1a4ed42535},
		{"tenant-a", 0, 0x24cbcbec76c2694a},
		{"tenant-a", 0xfeedface, 0x63b13b393bf51bcb},
		{"10.1.2.3", 0, 0x43bc2967acb25af4},
		{"10.1.2.3", 0xfeedface, 0x2863974f9d65102e},
		{"2001:db8::/64", 0, 0x74bb4ac9704ab632},
		{"2001:db8::/64", 0xfeedface, 0x47b075dccb86350d},
		{"a key of more than sixteen bytes", 0, 0xeccc77e16a6881b7},
		{"a key of more than sixteen bytes", 0xfeedface, 0xf9dfc772ed3c918},
	} {
		t.Run(tc.key, func(t *testing.T) {
			if got := hashKey(tc.secret, tc.key); got != tc.want {
				t.Fatalf("hashKey(%#x, %q) = %#x, want %#x", tc.secret, tc.key, got, tc.want)
			}
		})
	}
}

// goldenFrame is a frame of the current wire version with every field set, and its bytes.
var (
	goldenFrame = wire.Frame{Leaving: true, Idle: true, Partial: true, Limiter: hashKey(0, DefaultLimiterID), Incarnation: 1_700_000_000_123_456_789,
		Seq: 300, GlobalSum: 70_000, Global: 129, DemandSum: 1_000_000, Level: -42, Withheld: 1 << 14,
		Keys: []wire.KeyCount{{Key: hashKey(0, "tenant-a"), Tokens: 1, Level: 99}, {Key: hashKey(0, "tenant-b"), Tokens: 200, Refused: 3, Level: -7}}}
	goldenBytes = goldenBytesLiteral
)

const (
	goldenBytesLiteral = "67700a07961c565c8abd14cb15cd853dfe9c9717ac02f0a2048101c0843d53808001024a69c276eccbcb240100c60175fbf4ac2a0a32d2c801030d"
)

// goldenRelay is the golden frame relayed, on its last hop, for node-7,
// and its bytes: the envelope's header, then the frame's bytes unchanged.
const goldenRelay = "67700ac0066e6f64652d373b" + goldenBytesLiteral

// goldenDigest is the golden frame's running totals in a digest, on its
// last hop, from node-7 whole, from node-8 tagged and from node-9 tagged
// and truncated: the digest's header ("gp", 10, the relay, digest and
// last-hop flags), then its length,
// limiter and the entries.
const (
	goldenDigest      = "67700ae0"
	goldenDigestBytes = "67700ae04a961c565c8abd14cbf5837820c2f20715cd853dfe9c9717f0a2048101c0843d53808001a8857820c2f30ff97bf0a2048101c0843d538080015b877820c2f49ff97b708101c00453808001"
)

func TestRelayGolden(t *testing.T) {
	want, err := hex.DecodeString(goldenRelay)
	if err != nil {
		t.Fatal(err)
	}
	frame, _ := hex.DecodeString(goldenBytes)
	if got := wire.AppendRelay(nil, "node-7", true, frame); !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
	r, err := wire.OpenRelay(want)
	if err != nil || string(r.Origin) != "node-7" || !r.Spread || !bytes.Equal(r.Frames, frame) {
		t.Fatalf("opened %q %v %x, %v", r.Origin, r.Spread, r.Frames, err)
	}
}

func TestWireGolden(t *testing.T) {
	want, err := hex.DecodeString(goldenBytes)
	if err != nil {
		t.Fatal(err)
	}
	if got := wire.Encode(nil, &goldenFrame); !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
	var f wire.Frame
	if err := wire.Decode(want, &f); err != nil {
		t.Fatal(err)
	}
	g := goldenFrame
	if f.Leaving != g.Leaving || f.Idle != g.Idle || f.Partial != g.Partial || f.Limiter != g.Limiter || f.Incarnation != g.Incarnation || f.Seq != g.Seq ||
		f.GlobalSum != g.GlobalSum || f.Global != g.Global || f.DemandSum != g.DemandSum || f.Level != g.Level || f.Withheld != g.Withheld ||
		len(f.Keys) != 2 || f.Keys[0] != g.Keys[0] || f.Keys[1] != g.Keys[1] {
		t.Fatalf("decoded %+v, want %+v", f, g)
	}
}

// TestDigestGolden pins a digest: the golden frame's entry from node-7,
// whole, from node-8, tagged, and from node-9, tagged with its totals
// truncated to 7 and 14 bits, and what they read back as (the frame
// without its number and keyed entries; the tagged ones without their
// incarnation, but its tag; the truncated totals as their low bits).
func TestDigestGolden(t *testing.T) {
	whole := wire.Entry{Origin: wire.OriginHash("node-7")}
	tagged := wire.Entry{Origin: wire.OriginHash("node-8"), Tagged: true, Tag: wire.IncarnationTag(goldenFrame.Incarnation)}
	entries := wire.AppendDigestEntry(nil, whole, &goldenFrame)
	entries = wire.AppendDigestEntry(entries, tagged, &goldenFrame)
	truncated := wire.Entry{Origin: wire.OriginHash("node-9"), Tagged: true, Tag: wire.IncarnationTag(goldenFrame.Incarnation), GlobalBits: 7, DemandBits: 14}
	entries = wire.AppendDigestEntry(entries, truncated, &goldenFrame)
	got := wire.AppendDigest(nil, true, goldenFrame.Limiter, entries)
	want, err := hex.DecodeString(goldenDigestBytes)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || !bytes.HasPrefix(want, mustHex(t, goldenDigest)) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
	d, err := wire.OpenDigest(want)
	if err != nil || !d.Spread || d.Limiter != goldenFrame.Limiter {
		t.Fatalf("opened %+v, %v", d, err)
	}
	rest := d.Entries
	for _, head := range []wire.Entry{whole, tagged, truncated} {
		var f wire.Frame
		f.Limiter = d.Limiter
		var e wire.Entry
		e, rest, err = wire.NextEntry(rest, &f)
		g := goldenFrame
		g.Seq, g.Keys, f.Keys = 0, nil, nil
		if head.Tagged {
			g.Incarnation = 0
		}
		if head.GlobalBits != 0 {
			g.GlobalSum, g.DemandSum = g.GlobalSum%(1<<head.GlobalBits), g.DemandSum%(1<<head.DemandBits)
		}
		if err != nil || e != head || !reflect.DeepEqual(f, g) {
			t.Fatalf("read %+v %+v, %v; want %+v %+v", e, f, err, head, g)
		}
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes after the entries", len(rest))
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
