package gopherpace

import (
	"bytes"
	"errors"
	"testing"

	"github.com/pedreviljoen/gopherpace/core/transportkit"
)

func encodeFrame(f *frame) []byte {
	b := appendHeader(nil, f, len(f.keys))
	for _, kc := range f.keys {
		b = appendEntry(b, kc)
	}
	return b
}

func TestWireRoundTrip(t *testing.T) {
	in := frame{leaving: true, limiter: 42, incarnation: 1 << 60, seq: 300, globalSum: 1 << 40, global: 1_000_000,
		keys: []keyCount{{1, 1}, {hashKey(0, "tenant"), 127}, {^uint64(0), 128}, {7, int64(maxWireTokens)}}}
	b := encodeFrame(&in)
	var out frame
	if err := decodeFrame(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.leaving != in.leaving || out.limiter != in.limiter || out.incarnation != in.incarnation ||
		out.seq != in.seq || out.globalSum != in.globalSum || out.global != in.global || len(out.keys) != len(in.keys) {
		t.Fatalf("round trip: %+v, want %+v", out, in)
	}
	for i := range in.keys {
		if out.keys[i] != in.keys[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, out.keys[i], in.keys[i])
		}
	}
	for _, kc := range in.keys {
		if got := len(appendEntry(nil, kc)); got != entrySize(kc) {
			t.Fatalf("entrySize(%d) = %d, encoded %d", kc.tokens, entrySize(kc), got)
		}
	}
}

func TestWireBytesPerKey(t *testing.T) {
	f := frame{limiter: 1, incarnation: 2, seq: 3}
	for i := range 1000 {
		f.keys = append(f.keys, keyCount{hashKey(0, string(rune(i))), int64(i%100 + 1)})
	}
	b := encodeFrame(&f)
	if perKey := float64(len(b)) / 1000; perKey > 12 {
		t.Fatalf("%.1f bytes per key, budget 12", perKey)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := encodeFrame(&frame{limiter: 1, incarnation: 2, seq: 3, globalSum: 9, global: 4, keys: []keyCount{{5, 6}}})
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, errShort},
		{"truncated header", good[:10], errShort},
		{"truncated entry", good[:len(good)-1], errEntryCount},
		{"foreign", []byte("GET / HTTP/1.1\r\n\r\n"), errMagic},
		{"short foreign", []byte("xx"), errMagic},
		{"version 1", mutate(func(b []byte) []byte { b[2] = 1; return b }), errVersion},
		{"version 3", mutate(func(b []byte) []byte { b[2] = 3; return b }), errVersion},
		{"trailing byte", append(append([]byte(nil), good...), 0), errTrailing},
		{"entry count past the end", mutate(func(b []byte) []byte { b[len(b)-10] = 100; return b }), errEntryCount},
		{"delta above the running total", encodeFrame(&frame{globalSum: 3, global: 4}), errTokens},
		{"zero tokens in an entry", mutate(func(b []byte) []byte { b[len(b)-1] = 0; return b }), errTokens},
		{"overlong varint", append(good[:headerFixed:headerFixed], bytes.Repeat([]byte{0xff}, 11)...), errVarint},
	} {
		var f frame
		if err := decodeFrame(tc.b, &f); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// FuzzDecodeFrame: no input panics the decoder, and whatever it accepts
// re-encodes to a frame that decodes the same.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(encodeFrame(&frame{limiter: 1, incarnation: 2, seq: 3, globalSum: 10, global: 4, keys: []keyCount{{5, 6}, {7, 300}}}))
	f.Add(encodeFrame(&frame{leaving: true}))
	f.Add([]byte("gp\x02\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr frame
		if err := decodeFrame(b, &fr); err != nil {
			return
		}
		if fr.global < 0 || uint64(fr.global) > maxWireTokens {
			t.Fatalf("accepted global count %d", fr.global)
		}
		for _, kc := range fr.keys {
			if kc.tokens <= 0 || uint64(kc.tokens) > maxWireTokens {
				t.Fatalf("accepted entry count %d", kc.tokens)
			}
		}
		var again frame
		if err := decodeFrame(encodeFrame(&fr), &again); err != nil || again.seq != fr.seq || len(again.keys) != len(fr.keys) {
			t.Fatalf("re-encoding an accepted frame: %v", err)
		}
	})
}

func TestSeqWindow(t *testing.T) {
	var w seqWindow
	for _, tc := range []struct {
		seq  uint64
		want bool
	}{{10, true}, {10, false}, {12, true}, {11, true}, {11, false}, {9, true}, {1000, true}, {12, false}, {999, true}} {
		if got := w.accept(tc.seq); got != tc.want {
			t.Fatalf("accept(%d) = %v, want %v", tc.seq, got, tc.want)
		}
	}
	// Seen: 9..12, 999, 1000 of the 9..1000 range.
	if got := w.missing(); got != 992-6 {
		t.Fatalf("missing %d, want %d", got, 992-6)
	}
	// A number far ahead (a lie, or a long silence) does not shut out the
	// numbers that follow the true ones: the window restarts at them.
	for _, tc := range []struct {
		seq  uint64
		want bool
	}{{5000, true}, {1001, true}, {1002, true}, {1001, false}} {
		if got := w.accept(tc.seq); got != tc.want {
			t.Fatalf("after a jump: accept(%d) = %v, want %v", tc.seq, got, tc.want)
		}
	}
}

// A transport of the smallest frame size the contract allows fits a header
// and one keyed entry of any size.
func TestMinFrameSizeFitsAnEntry(t *testing.T) {
	if headerMax+entryMax > transportkit.MinFrameSize {
		t.Fatalf("a header and an entry take up to %d bytes; transportkit.MinFrameSize is %d", headerMax+entryMax, transportkit.MinFrameSize)
	}
}
