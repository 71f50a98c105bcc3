package gopherpace

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// Golden values pin what every node of a cluster must compute alike. A
// change to either breaks a cluster that runs two versions during a
// rolling deploy: change them only together with the wire version, and
// say so in the release notes.

// TestKeyHashGolden pins the key hash: nodes that hash a key differently
// keep different buckets for it and never charge each other's admits. It
// is SipHash-2-4, checked against its authors' reference vectors (key
// 00 01 … 0f, the message 00 01 … of each length), and a secret other
// than 16 bytes is reduced by SHA-256 (pinned here), as is the
// fingerprint frames carry.
func TestKeyHashGolden(t *testing.T) {
	var ref [16]byte
	for i := range ref {
		ref[i] = byte(i)
	}
	msg := make([]byte, 64)
	for i := range msg {
		msg[i] = byte(i)
	}
	h := bucket.NewKeyHasher(ref[:])
	for n, want := range map[int]uint64{0: 0x726fdb47dd0e0e31, 1: 0x74f839c593dc67fd, 7: 0xab0200f58b01d137,
		8: 0x93f5f5799a932462, 15: 0xa129ca6149be45e5, 16: 0x3f2acc7f57c29bdb, 63: 0x958a324ceb064572} {
		if got := h.Sum(string(msg[:n])); got != want {
			t.Errorf("SipHash-2-4 of %d bytes = %#x, want %#x", n, got, want)
		}
	}
	long := bucket.NewKeyHasher([]byte("a secret of more than sixteen bytes"))
	for _, tc := range []struct {
		got, want uint64
		what      string
	}{
		{long.Sum("tenant-a"), 0xd92290178dddeaaf, "a long secret's hash of tenant-a"},
		{uint64(h.Fingerprint()), 0x935517f3, "the reference key's fingerprint"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %#x, want %#x", tc.what, tc.got, tc.want)
		}
	}
}

// goldenFrame is a frame of the current wire version with every field set, and its bytes.
var (
	goldenFrame = wire.Frame{Leaving: true, Idle: true, Partial: true, Limiter: wire.NameHash(0, DefaultLimiterID), Incarnation: 1_700_000_000_123_456_789,
		Seq: 300, GlobalSum: 70_000, Global: 129, DemandSum: 1_000_000, Level: -42, Withheld: 1 << 14,
		KeyHashID: bucket.NewKeyHasher(TestKeyHashSecret).Fingerprint(),
		Keys:      []wire.KeyCount{{Key: KeyHashOf(TestKeyHashSecret, "tenant-a"), Tokens: 1, Level: 99}, {Key: KeyHashOf(TestKeyHashSecret, "tenant-b"), Tokens: 200, Refused: 3, Level: -7}}}
	goldenBytes = goldenBytesLiteral
)

const (
	goldenBytesLiteral = "67700b07961c565c8abd14cb15cd853dfe9c9717ac02f0a2048101c0843d53808001022b34b5ecb82945e94559df170100c601694644a2645e0a7fc801030d"
)

// goldenRelay is the golden frame relayed, on its last hop, for node-7,
// and its bytes: the envelope's header, then the frame's bytes unchanged.
const goldenRelay = "67700bc0066e6f64652d373f" + goldenBytesLiteral

// goldenDigest is the golden frame's running totals in a digest, on its
// last hop, from node-7 whole, from node-8 tagged and from node-9 tagged
// and truncated: the digest's header ("gp", 11, the relay, digest and
// last-hop flags), then its length,
// limiter and the entries.
const (
	goldenDigest      = "67700be0"
	goldenDigestBytes = "67700be04a961c565c8abd14cbf5837820c2f20715cd853dfe9c9717f0a2048101c0843d53808001a8857820c2f30ff97bf0a2048101c0843d538080015b877820c2f49ff97b708101c00453808001"
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
		g.Seq, g.Keys, g.KeyHashID, f.Keys = 0, nil, 0, nil
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
