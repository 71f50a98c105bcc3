package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	in := Frame{Leaving: true, Idle: true, Partial: true, Limiter: 42, Incarnation: 1 << 60, Seq: 300, GlobalSum: 1 << 40, Global: 1_000_000,
		DemandSum: 1 << 41, Level: -7, Withheld: WithheldOne / 3, KeyHashID: 0xdeadbeef,
		Keys: []KeyCount{{1, 1, 0, 0}, {0x24cbcbec76c2694a, 127, 128, -64}, {^uint64(0), 128, 1, 63}, {7, int64(MaxTokens), int64(MaxTokens), -int64(MaxTokens)}, {8, 0, 3, int64(MaxTokens)}}}
	b := Encode(nil, &in)
	var out Frame
	if err := Decode(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Leaving != in.Leaving || out.Idle != in.Idle || out.Partial != in.Partial || out.Limiter != in.Limiter || out.Incarnation != in.Incarnation ||
		out.Seq != in.Seq || out.GlobalSum != in.GlobalSum || out.Global != in.Global ||
		out.DemandSum != in.DemandSum || out.Level != in.Level || out.Withheld != in.Withheld || out.KeyHashID != in.KeyHashID || len(out.Keys) != len(in.Keys) {
		t.Fatalf("round trip: %+v, want %+v", out, in)
	}
	for i := range in.Keys {
		if out.Keys[i] != in.Keys[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, out.Keys[i], in.Keys[i])
		}
	}
	for _, kc := range in.Keys {
		if got := len(AppendEntry(nil, kc)); got != EntrySize(kc) || got > EntryMax {
			t.Fatalf("EntrySize(%+v) = %d, encoded %d (EntryMax %d)", kc, EntrySize(kc), got, EntryMax)
		}
	}
}

// The largest header of all fits HeaderMax.
func TestHeaderMax(t *testing.T) {
	f := Frame{Leaving: true, Limiter: ^uint64(0), Incarnation: ^uint64(0), Seq: ^uint64(0), GlobalSum: ^uint64(0),
		Global: -1, DemandSum: ^uint64(0), Level: -1 << 63, Withheld: ^uint64(0)}
	if got := len(AppendHeader(nil, &f, 1<<62)); got > HeaderMax {
		t.Fatalf("a header of %d bytes, HeaderMax %d", got, HeaderMax)
	}
}

func TestBytesPerKey(t *testing.T) {
	f := Frame{Limiter: 1, Incarnation: 2, Seq: 3}
	for i := range 1000 {
		f.Keys = append(f.Keys, KeyCount{uint64(i) * 0x9e3779b97f4a7c15, int64(i%100 + 1), int64(i % 3), int64(i%20 - 10)})
	}
	b := Encode(nil, &f)
	if perKey := float64(len(b)) / 1000; perKey > 12 {
		t.Fatalf("%.1f bytes per key, budget 12", perKey)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := Encode(nil, &Frame{Limiter: 1, Incarnation: 2, Seq: 3, GlobalSum: 9, Global: 4, Keys: []KeyCount{{5, 6, 0, 0}}})
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"truncated header", good[:10], ErrShort},
		{"truncated entry", good[:len(good)-1], ErrEntryCount},
		{"foreign", []byte("GET / HTTP/1.1\r\n\r\n"), ErrMagic},
		{"short foreign", []byte("xx"), ErrMagic},
		{"version 1", mutate(func(b []byte) []byte { b[2] = 1; return b }), ErrVersion},
		{"version 2", mutate(func(b []byte) []byte { b[2] = 2; return b }), ErrVersion},
		{"version 3", mutate(func(b []byte) []byte { b[2] = 3; return b }), ErrVersion},
		{"version 4", mutate(func(b []byte) []byte { b[2] = 4; return b }), ErrVersion},
		{"version 5", mutate(func(b []byte) []byte { b[2] = 5; return b }), ErrVersion},
		{"version 6", mutate(func(b []byte) []byte { b[2] = 6; return b }), ErrVersion},
		{"version 7", mutate(func(b []byte) []byte { b[2] = 7; return b }), ErrVersion},
		{"version 8", mutate(func(b []byte) []byte { b[2] = 8; return b }), ErrVersion},
		{"version 9", mutate(func(b []byte) []byte { b[2] = 9; return b }), ErrVersion},
		{"version 10", mutate(func(b []byte) []byte { b[2] = 10; return b }), ErrVersion},
		{"version 12", mutate(func(b []byte) []byte { b[2] = 12; return b }), ErrVersion},
		{"no key hash fingerprint", append(AppendHeader(nil, &Frame{Limiter: 1, Seq: 1}, 1)[:HeaderFixed+7:HeaderFixed+7], 1, 2), ErrShort},
		{"an envelope", AppendRelay(nil, "n", false, good), ErrRelay},
		{"trailing byte", append(append([]byte(nil), good...), 0), ErrTrailing},
		{"entry count past the end", mutate(func(b []byte) []byte { b[len(b)-16] = 100; return b }), ErrEntryCount},
		{"delta above the running total", Encode(nil, &Frame{GlobalSum: 3, Global: 4}), ErrTokens},
		{"withheld above the whole refill", Encode(nil, &Frame{Withheld: WithheldOne + 1}), ErrTokens},
		{"an entry that counts nothing", mutate(func(b []byte) []byte { b[len(b)-3] = 0; return b }), ErrTokens},
		{"a level out of range", Encode(nil, &Frame{Seq: 1, Keys: []KeyCount{{5, 1, 0, -int64(MaxTokens) - 1}}}), ErrTokens},
		{"tokens out of range", Encode(nil, &Frame{Seq: 1, Keys: []KeyCount{{5, int64(MaxTokens) + 1, 0, 0}}}), ErrTokens},
		{"refusals out of range", Encode(nil, &Frame{Seq: 1, Keys: []KeyCount{{5, 1, int64(MaxTokens) + 1, 0}}}), ErrTokens},
		{"overlong varint", append(good[:HeaderFixed:HeaderFixed], bytes.Repeat([]byte{0xff}, 11)...), ErrVarint},
	} {
		var f Frame
		if err := Decode(tc.b, &f); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// A datagram of several frames splits into exactly those frames, and a
// datagram cut anywhere inside a frame cannot be split past the cut.
func TestNextSplitsADatagram(t *testing.T) {
	frames := [][]byte{
		Encode(nil, &Frame{Limiter: 1, Incarnation: 2, GlobalSum: 5, Global: 5, Level: -3}),
		Encode(nil, &Frame{Limiter: 7, Incarnation: 2, Seq: 9, Keys: []KeyCount{{5, 6, 0, 1}, {7, 300, 2, -5}, {9, 0, 1, 0}}}),
		Encode(nil, &Frame{Leaving: true, Limiter: 1 << 60, Withheld: WithheldOne}),
		Encode(nil, &Frame{Idle: true, Limiter: 3, Incarnation: 4, GlobalSum: 8, DemandSum: 9}),
		Encode(nil, &Frame{Partial: true, Limiter: 3, Incarnation: 5}),
	}
	var datagram []byte
	for _, f := range frames {
		datagram = append(datagram, f...)
	}
	rest := datagram
	for i, want := range frames {
		var f []byte
		var err error
		if f, rest, err = Next(rest); err != nil || !bytes.Equal(f, want) {
			t.Fatalf("frame %d: %x, %v; want %x", i, f, err, want)
		}
		var fr Frame
		if err := Decode(f, &fr); err != nil {
			t.Fatalf("frame %d does not decode: %v", i, err)
		}
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left over", len(rest))
	}
	for cut := 1; cut < len(frames[1]); cut++ {
		if _, _, err := Next(frames[1][:cut]); err == nil {
			t.Fatalf("a frame cut at %d of %d bytes split", cut, len(frames[1]))
		}
	}
	old := append([]byte(nil), frames[0]...)
	old[2] = 2
	if _, _, err := Next(old); !errors.Is(err, ErrVersion) {
		t.Fatalf("a version-2 frame: %v, want ErrVersion", err)
	}
}

// FuzzDecodeFrame: no input panics the decoder, whatever it accepts
// re-encodes to a frame that decodes the same, and Next agrees with it:
// a frame Decode accepts is one whole frame to Next, and whatever Next
// splits off is a prefix of its input.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(Encode(nil, &Frame{Limiter: 1, Incarnation: 2, Seq: 3, GlobalSum: 10, Global: 4, Keys: []KeyCount{{5, 6, 0, 1}, {7, 300, 2, -5}, {9, 0, 1, 0}}}))
	f.Add(Encode(nil, &Frame{Leaving: true}))
	f.Add(Encode(nil, &Frame{Idle: true, GlobalSum: 3}))
	f.Add([]byte("gp\x0a\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if frame, rest, err := Next(b); err == nil && (len(frame)+len(rest) != len(b) || !bytes.Equal(frame, b[:len(frame)])) {
			t.Fatalf("Next split %d bytes into %d and %d", len(b), len(frame), len(rest))
		}
		var fr Frame
		if err := Decode(b, &fr); err != nil {
			return
		}
		if frame, rest, err := Next(b); err != nil || len(rest) != 0 || len(frame) != len(b) {
			t.Fatalf("Decode accepts a frame that Next splits into %d and %d bytes (%v)", len(frame), len(rest), err)
		}
		if fr.Global < 0 || uint64(fr.Global) > MaxTokens {
			t.Fatalf("accepted global count %d", fr.Global)
		}
		for _, kc := range fr.Keys {
			if kc.Tokens < 0 || kc.Refused < 0 || kc.Tokens+kc.Refused == 0 || uint64(kc.Tokens) > MaxTokens || uint64(kc.Refused) > MaxTokens ||
				kc.Level > int64(MaxTokens) || kc.Level < -int64(MaxTokens) {
				t.Fatalf("accepted entry counts %+v", kc)
			}
		}
		again := Encode(nil, &fr)
		if !bytes.Equal(again, b) {
			var back Frame
			if err := Decode(again, &back); err != nil || back.Seq != fr.Seq || len(back.Keys) != len(fr.Keys) {
				t.Fatalf("re-encoding an accepted frame: %v", err)
			}
		}
	})
}

// A flush of 1000 keyed entries, as a hot keyed limiter sends one.
func benchBatch() *Frame {
	f := &Frame{Limiter: 1, Incarnation: 2, Seq: 3}
	for i := range 1000 {
		f.Keys = append(f.Keys, KeyCount{uint64(i) * 0x9e3779b97f4a7c15, int64(i%50 + 1), 0, 0})
	}
	return f
}

func BenchmarkEncode1000Keys(b *testing.B) {
	f := benchBatch()
	buf := make([]byte, 0, 16<<10)
	b.ReportAllocs()
	for b.Loop() {
		buf = Encode(buf[:0], f)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/key")
	b.ReportMetric(float64(len(buf))/1000, "B/key")
}

func BenchmarkDecode1000Keys(b *testing.B) {
	buf := Encode(nil, benchBatch())
	var out Frame
	b.ReportAllocs()
	for b.Loop() {
		if err := Decode(buf, &out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/key")
}

// An envelope carries an origin's frames exactly: it opens to the same
// origin, hop and bytes, splits off a datagram like a frame, and its
// frames split and decode as sent.
func TestRelayRoundTrip(t *testing.T) {
	a := Encode(nil, &Frame{Limiter: 1, Incarnation: 2, GlobalSum: 5, Global: 5, Level: -3})
	b := Encode(nil, &Frame{Limiter: 7, Incarnation: 2, Seq: 9, Keys: []KeyCount{{5, 6, 0, 1}}})
	frames := append(append([]byte(nil), a...), b...)
	for _, spread := range []bool{false, true} {
		env := AppendRelay(nil, "node-7", spread, frames)
		if len(env) != RelaySize("node-7", len(frames)) {
			t.Fatalf("RelaySize %d, encoded %d", RelaySize("node-7", len(frames)), len(env))
		}
		datagram := append(append(append([]byte(nil), a...), env...), b...)
		first, rest, err := Next(datagram)
		if err != nil || !bytes.Equal(first, a) || IsRelay(first) {
			t.Fatalf("first piece: %x, %v", first, err)
		}
		piece, rest, err := Next(rest)
		if err != nil || !bytes.Equal(piece, env) || !IsRelay(piece) {
			t.Fatalf("envelope piece: %x, %v", piece, err)
		}
		if last, rest, err := Next(rest); err != nil || !bytes.Equal(last, b) || len(rest) != 0 {
			t.Fatalf("last piece: %x, %v", last, err)
		}
		r, err := OpenRelay(piece)
		if err != nil || string(r.Origin) != "node-7" || r.Spread != spread || !bytes.Equal(r.Frames, frames) {
			t.Fatalf("opened %q %v %x, %v", r.Origin, r.Spread, r.Frames, err)
		}
		var f Frame
		if err := Decode(piece, &f); !errors.Is(err, ErrRelay) {
			t.Fatalf("Decode of an envelope: %v, want ErrRelay", err)
		}
		for cut := 1; cut < len(env); cut++ {
			if _, err := OpenRelay(env[:cut]); err == nil {
				t.Fatalf("an envelope cut at %d of %d bytes opened", cut, len(env))
			}
			if p, _, err := Next(env[:cut]); err == nil {
				t.Fatalf("an envelope cut at %d of %d bytes split off %d bytes", cut, len(env), len(p))
			}
		}
	}
}

// Envelopes that are not exactly an origin and its frames are refused.
func TestOpenRelayRejects(t *testing.T) {
	frame := Encode(nil, &Frame{Limiter: 1, Incarnation: 2, GlobalSum: 5, Global: 5})
	good := AppendRelay(nil, "n", false, frame)
	nested := AppendRelay(nil, "n", false, good)
	noOrigin := AppendRelay(nil, "", false, frame)
	unknownFlag := append([]byte(nil), good...)
	unknownFlag[3] |= 1
	trailing := append(append([]byte(nil), good...), 0)
	garbage := AppendRelay(nil, "n", false, []byte("not a frame at all, but long enough"))
	oldVersion := append([]byte(nil), good...)
	oldVersion[2] = 5
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"nested", nested}, {"no origin", noOrigin}, {"unknown flag", unknownFlag}, {"trailing", trailing},
		{"garbage frames", garbage}, {"old version", oldVersion}, {"empty", nil},
	} {
		if _, err := OpenRelay(tc.b); err == nil {
			t.Errorf("%s: opened", tc.name)
		}
	}
	if _, err := OpenRelay(good); err != nil {
		t.Fatalf("the good envelope: %v", err)
	}
}

// FuzzOpenRelay: no input panics Next or OpenRelay, an envelope that
// opens is one whole piece to Next, and re-encoding it opens the same.
func FuzzOpenRelay(f *testing.F) {
	frame := Encode(nil, &Frame{Limiter: 1, Incarnation: 2, Seq: 3, GlobalSum: 10, Global: 4, Keys: []KeyCount{{5, 6, 0, 1}}})
	f.Add(AppendRelay(nil, "node-1", false, frame))
	f.Add(AppendRelay(nil, "n", true, append(append([]byte(nil), frame...), frame...)))
	f.Add([]byte("gp\x0a\x80\x01n\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if piece, rest, err := Next(b); err == nil && (len(piece)+len(rest) != len(b) || !bytes.Equal(piece, b[:len(piece)])) {
			t.Fatalf("Next split %d bytes into %d and %d", len(b), len(piece), len(rest))
		}
		r, err := OpenRelay(b)
		if err != nil {
			return
		}
		if piece, rest, err := Next(b); err != nil || len(rest) != 0 || len(piece) != len(b) {
			t.Fatalf("OpenRelay accepts an envelope that Next splits into %d and %d bytes (%v)", len(piece), len(rest), err)
		}
		if len(r.Origin) == 0 || len(r.Origin) > MaxOrigin || len(r.Frames) < HeaderFixed {
			t.Fatalf("opened origin %q, %d bytes of frames", r.Origin, len(r.Frames))
		}
		again, err := OpenRelay(AppendRelay(nil, string(r.Origin), r.Spread, r.Frames))
		if err != nil || !bytes.Equal(again.Origin, r.Origin) || again.Spread != r.Spread || !bytes.Equal(again.Frames, r.Frames) {
			t.Fatalf("re-encoding an opened envelope: %v", err)
		}
	})
}

// A digest carries running totals exactly: it splits off a datagram like
// a frame, opens to the same limiter and hop, and its entries read back
// as the frames they came from, without their keyed entries and number.
func TestDigestRoundTrip(t *testing.T) {
	frames := []Frame{
		{Limiter: 9, Incarnation: 1 << 60, GlobalSum: 5, Global: 5, DemandSum: 12, Level: -3, Withheld: 100},
		{Leaving: true, Idle: true, Partial: true, Limiter: 9, Incarnation: 2, GlobalSum: 1 << 40, DemandSum: 1 << 41, Level: 1000, Withheld: WithheldOne},
		{Limiter: 9, Incarnation: 3, Seq: 4, GlobalSum: 7, Global: 1, Keys: []KeyCount{{5, 6, 0, 1}}},
		{Limiter: 9, Incarnation: 4, GlobalSum: 1<<40 + 300, Global: 2, DemandSum: 1<<41 + 5, Level: 7},
	}
	// The second goes tagged; the fourth tagged, its totals as their low
	// 14 and 7 bits.
	heads := make([]Entry, len(frames))
	for i := range frames {
		heads[i] = Entry{Origin: OriginHash(fmt.Sprint("node-", i))}
	}
	heads[1].Tagged, heads[1].Tag = true, IncarnationTag(frames[1].Incarnation)
	heads[3].Tagged, heads[3].Tag, heads[3].GlobalBits, heads[3].DemandBits = true, IncarnationTag(frames[3].Incarnation), 14, 7
	var entries []byte
	for i := range frames {
		before := len(entries)
		entries = AppendDigestEntry(entries, heads[i], &frames[i])
		if n := len(entries) - before; n > DigestEntryMax {
			t.Fatalf("entry %d took %d bytes, more than DigestEntryMax", i, n)
		}
	}
	lone := Encode(nil, &frames[0])
	for _, spread := range []bool{false, true} {
		d := AppendDigest(nil, spread, 9, entries)
		if len(d) != DigestSize(len(entries)) {
			t.Fatalf("DigestSize %d, encoded %d", DigestSize(len(entries)), len(d))
		}
		datagram := append(append(append([]byte(nil), lone...), d...), lone...)
		_, rest, _ := Next(datagram)
		piece, rest, err := Next(rest)
		if err != nil || !bytes.Equal(piece, d) || !IsDigest(piece) || !IsRelay(piece) {
			t.Fatalf("digest piece: %x, %v", piece, err)
		}
		if last, rest, err := Next(rest); err != nil || !bytes.Equal(last, lone) || len(rest) != 0 {
			t.Fatalf("last piece: %x, %v", last, err)
		}
		got, err := OpenDigest(piece)
		if err != nil || got.Limiter != 9 || got.Spread != spread || !bytes.Equal(got.Entries, entries) {
			t.Fatalf("opened %+v, %v", got, err)
		}
		if s := Spread(nil, piece); !IsDigest(s) {
			t.Fatal("Spread made no digest")
		} else if o, err := OpenDigest(s); err != nil || !o.Spread || !bytes.Equal(o.Entries, entries) {
			t.Fatalf("spread: %+v, %v", o, err)
		}
		b := got.Entries
		for i, want := range frames {
			var f Frame
			f.Limiter = got.Limiter
			var e Entry
			if e, b, err = NextEntry(b, &f); err != nil || e != heads[i] {
				t.Fatalf("entry %d: %+v, %v; want %+v", i, e, err, heads[i])
			}
			want.Seq, want.Keys = 0, nil
			if e.Tagged {
				want.Incarnation = 0
			}
			if e.GlobalBits != 0 {
				want.GlobalSum &= 1<<e.GlobalBits - 1
			}
			if e.DemandBits != 0 {
				want.DemandSum &= 1<<e.DemandBits - 1
			}
			f.Keys = nil
			if !reflect.DeepEqual(f, want) {
				t.Fatalf("entry %d read %+v, want %+v", i, f, want)
			}
		}
		if len(b) != 0 {
			t.Fatalf("%d bytes after the entries", len(b))
		}
		var f Frame
		if err := Decode(piece, &f); err == nil {
			t.Fatal("Decode took a digest for a frame")
		}
		if _, err := OpenRelay(piece); err == nil {
			t.Fatal("OpenRelay took a digest for an envelope")
		}
		for cut := 1; cut < len(d); cut++ {
			if _, err := OpenDigest(d[:cut]); err == nil {
				t.Fatalf("a digest cut at %d of %d bytes opened", cut, len(d))
			}
		}
	}
}

// Digests that are not exactly a limiter and well-formed entries are
// refused: the same bounds as a frame's fields.
func TestOpenDigestRejects(t *testing.T) {
	entry := func(f Frame) []byte { return AppendDigestEntry(nil, Entry{Origin: 1}, &f) }
	tagged := AppendDigestEntry(nil, Entry{Origin: 1, Tagged: true, Tag: 9}, &Frame{GlobalSum: 5, Global: 5})
	good := AppendDigest(nil, false, 1, entry(Frame{Incarnation: 2, GlobalSum: 5, Global: 5}))
	unknownFlag := append([]byte(nil), good...)
	unknownFlag[3] |= 1
	badEntryFlag := AppendDigest(nil, false, 1, entry(Frame{Incarnation: 2, GlobalSum: 5, Global: 5}))
	badEntryFlag[len(badEntryFlag)-len(entry(Frame{Incarnation: 2, GlobalSum: 5, Global: 5}))+6] |= 0x80
	trailing := AppendDigest(nil, false, 1, append(entry(Frame{Incarnation: 2, GlobalSum: 5, Global: 5}), 0))
	// A total of 14 bits said to be of 7: past its width.
	pastWidth := AppendDigestEntry(nil, Entry{Origin: 1, Tagged: true, Tag: 9, GlobalBits: 14}, &Frame{GlobalSum: 200, Global: 5})
	pastWidth[6] = pastWidth[6]&^(3<<4) | 1<<4
	// Widths in an entry that is not tagged.
	untaggedWidth := entry(Frame{Incarnation: 2, GlobalSum: 5, Global: 5})
	untaggedWidth[6] |= 1 << 6
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"unknown flag", unknownFlag},
		{"unknown entry flag", badEntryFlag},
		{"trailing", trailing},
		{"no entries", AppendDigest(nil, false, 1, nil)},
		{"tagged, cut", AppendDigest(nil, false, 1, tagged[:9])},
		{"tagged, then a cut one", AppendDigest(nil, false, 1, append(append([]byte(nil), tagged...), tagged[:12]...))},
		{"global over the sum", AppendDigest(nil, false, 1, entry(Frame{GlobalSum: 5, Global: 6}))},
		{"a truncated total past its width", AppendDigest(nil, false, 1, pastWidth)},
		{"a width in an untagged entry", AppendDigest(nil, false, 1, untaggedWidth)},
		{"withheld over one", AppendDigest(nil, false, 1, entry(Frame{Withheld: WithheldOne + 1}))},
		{"old version", append([]byte{'g', 'p', 7}, good[3:]...)},
		{"empty", nil},
	} {
		if _, err := OpenDigest(tc.b); err == nil {
			t.Errorf("%s: opened", tc.name)
		}
	}
	if _, err := OpenDigest(good); err != nil {
		t.Fatalf("the good digest: %v", err)
	}
}

// FuzzOpenDigest: no input panics Next, OpenDigest or NextEntry; a digest
// that opens is one whole piece to Next, and its entries, re-encoded,
// read the same.
func FuzzOpenDigest(f *testing.F) {
	var entries []byte
	entries = AppendDigestEntry(entries, Entry{Origin: 1}, &Frame{Incarnation: 2, GlobalSum: 10, Global: 4, DemandSum: 11, Level: -2, Withheld: 3})
	entries = AppendDigestEntry(entries, Entry{Origin: 7}, &Frame{Leaving: true, Incarnation: 5, GlobalSum: 1 << 33})
	entries = AppendDigestEntry(entries, Entry{Origin: 8, Tagged: true, Tag: 0xbeef}, &Frame{Idle: true, GlobalSum: 3, DemandSum: 4})
	entries = AppendDigestEntry(entries, Entry{Origin: 9, Tagged: true, Tag: 0xbeef, GlobalBits: 7, DemandBits: 21}, &Frame{GlobalSum: 1<<30 + 3, Global: 1, DemandSum: 1<<30 + 9})
	f.Add(AppendDigest(nil, false, 3, entries))
	f.Add(AppendDigest(nil, true, 3, entries[:20]))
	f.Fuzz(func(t *testing.T, b []byte) {
		if piece, rest, err := Next(b); err == nil && (len(piece)+len(rest) != len(b) || !bytes.Equal(piece, b[:len(piece)])) {
			t.Fatalf("Next split %d bytes into %d and %d", len(b), len(piece), len(rest))
		}
		d, err := OpenDigest(b)
		if err != nil {
			return
		}
		if piece, rest, err := Next(b); err != nil || len(rest) != 0 || len(piece) != len(b) {
			t.Fatalf("OpenDigest accepts a digest that Next splits into %d and %d bytes (%v)", len(piece), len(rest), err)
		}
		// Varints may come longer than needed: compare what they read.
		read := func(e []byte) (origins []Entry, frames []Frame) {
			for len(e) > 0 {
				var fr Frame
				origin, rest, err := NextEntry(e, &fr)
				if err != nil {
					t.Fatalf("an opened digest's entry: %v", err)
				}
				e, fr.Keys = rest, nil
				origins, frames = append(origins, origin), append(frames, fr)
			}
			return origins, frames
		}
		origins, frames := read(d.Entries)
		var again []byte
		for i := range frames {
			again = AppendDigestEntry(again, origins[i], &frames[i])
		}
		o2, f2 := read(again)
		if !reflect.DeepEqual(o2, origins) || !reflect.DeepEqual(f2, frames) {
			t.Fatalf("re-encoded entries read %v %+v, want %v %+v", o2, f2, origins, frames)
		}
	})
}

// Widen gives back the total a truncated one was cut from whenever the
// receiver's last total is within half the width of it, either side (a
// relay chooses the width so: TotalBits), at every width, across wraps
// of the low bits, near zero and near the largest totals.
func TestWiden(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for range 200_000 {
		bits := totalWidths[1+rng.IntN(3)]
		half := uint64(1) << (bits - 1)
		total := rng.Uint64N(MaxTokens)
		switch rng.IntN(3) {
		case 0:
			total = rng.Uint64N(4 * half) // near zero
		case 1:
			total = MaxTokens - rng.Uint64N(4*half)
		}
		d := rng.Uint64N(half)
		last := total + d
		if rng.IntN(2) == 0 && d <= total {
			last = total - d
		}
		if got, ok := Widen(total&(1<<bits-1), bits, last); !ok || got != total {
			t.Fatalf("Widen(%d, %d bits, last %d) = %d, %v; want %d", total&(1<<bits-1), bits, last, got, ok, total)
		}
	}
	// Further than half, a total is read a wrap away (128, 65 ahead of
	// 63, reads as 0): why a relay's width has a margin.
	if got, _ := Widen(128&127, 7, 63); got != 0 {
		t.Errorf("Widen(0, 7, 63) = %d, want 0, a wrap below the 128 cut", got)
	}
}

// TotalBits picks the narrowest width whose half exceeds the spread, and
// none where the total in full takes no more bytes than the width's
// varint, or the spread is too wide for every width.
func TestTotalBits(t *testing.T) {
	for _, tc := range []struct {
		total, spread uint64
		want          uint8
	}{
		{100, 10, 0},          // one byte in full
		{1 << 20, 63, 7},      // three bytes in full, one truncated
		{1 << 20, 64, 14},     // half of 7 bits is 64: not over 64
		{1 << 20, 8191, 14},   // two bytes
		{1 << 20, 8192, 0},    // 21 bits would take three bytes, as the total in full does
		{1 << 30, 8192, 21},   // five bytes in full
		{1 << 30, 1 << 20, 0}, // wider than every width
		{10_000, 100, 0},      // two bytes in full, as 14 bits would take
		{20_000, 100, 14},     // three bytes in full
	} {
		if got := TotalBits(tc.total, tc.spread); got != tc.want {
			t.Errorf("TotalBits(%d, %d) = %d, want %d", tc.total, tc.spread, got, tc.want)
		}
	}
}
