package wire

import (
	"bytes"
	"errors"
	"testing"
)

func gaugeFrame(f *GaugeFrame) []byte {
	b := AppendGaugeHeader(nil, f, len(f.Gauges))
	for _, g := range f.Gauges {
		b = AppendGauge(b, g)
	}
	return b
}

// A gauge frame comes back as written, Next finds its end among other
// frames, and neither decoder reads the other's frames.
func TestGaugeFramesRoundTripAndStayApart(t *testing.T) {
	in := GaugeFrame{Leaving: true, Limiter: 7, Incarnation: 9, Seq: 300, Round: 12, Acquired: 1 << 33, Attempts: 1<<33 + 5,
		KeyHashID: 0xabcd, Gauges: []Gauge{{0, 3, 40, 2}, {1 << 63, 0, 0, 0}, {5, MaxInFlight, MaxInFlight, MaxInFlight}}}
	b := gaugeFrame(&in)
	var out GaugeFrame
	if err := DecodeGauges(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Leaving != in.Leaving || out.Limiter != in.Limiter || out.Incarnation != in.Incarnation || out.Seq != in.Seq || out.Round != in.Round ||
		out.Acquired != in.Acquired || out.Attempts != in.Attempts || out.KeyHashID != in.KeyHashID || len(out.Gauges) != 3 ||
		out.Gauges[0] != in.Gauges[0] || out.Gauges[1] != in.Gauges[1] || out.Gauges[2] != in.Gauges[2] {
		t.Fatalf("decoded %+v from %+v", out, in)
	}
	rate := Encode(nil, &Frame{Limiter: 7, Seq: 1, GlobalSum: 2, Global: 1})
	datagram := append(append(append([]byte{}, rate...), b...), rate...)
	frame, rest, err := Next(datagram)
	if err != nil || !bytes.Equal(frame, rate) {
		t.Fatalf("first frame: %v", err)
	}
	if frame, rest, err = Next(rest); err != nil || !bytes.Equal(frame, b) || !IsGauges(frame) || !bytes.Equal(rest, rate) {
		t.Fatalf("Next did not split the gauge frame off: %v", err)
	}
	var f Frame
	if err := Decode(b, &f); !errors.Is(err, ErrGauges) {
		t.Fatalf("Decode of a gauge frame: %v", err)
	}
	if err := DecodeGauges(rate, &out); !errors.Is(err, ErrGauges) || IsGauges(rate) {
		t.Fatalf("DecodeGauges of a rate frame: %v", err)
	}
	empty := gaugeFrame(&GaugeFrame{Seq: 1})
	if err := DecodeGauges(empty, &out); err != nil || len(out.Gauges) != 0 {
		t.Fatalf("a frame of no entries: %v, %+v", err, out)
	}
	for name, bad := range map[string]GaugeFrame{
		"seq 0":           {Seq: 0},
		"too many":        {Seq: 1, Gauges: []Gauge{{1, MaxInFlight + 1, 0, 0}}},
		"demand beyond":   {Seq: 1, Gauges: []Gauge{{1, 0, MaxInFlight + 1, 0}}},
		"refusing beyond": {Seq: 1, Gauges: []Gauge{{1, 0, 0, MaxInFlight + 1}}},
	} {
		if err := DecodeGauges(gaugeFrame(&bad), &out); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := DecodeGauges(append(gaugeFrame(&in), 0), &out); err == nil {
		t.Error("trailing byte accepted")
	}
}

func FuzzDecodeGauges(f *testing.F) {
	f.Add(gaugeFrame(&GaugeFrame{Limiter: 1, Seq: 2, Round: 3, Gauges: []Gauge{{0, 1, 2, 0}, {9, 0, 7, 3}}}))
	f.Add(gaugeFrame(&GaugeFrame{Seq: 1, Leaving: true}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var g GaugeFrame
		if err := DecodeGauges(b, &g); err != nil {
			return
		}
		if g.Seq == 0 {
			t.Fatal("accepted seq 0")
		}
		for _, e := range g.Gauges {
			if e.InFlight < 0 || e.InFlight > MaxInFlight || e.Demand < 0 || e.Demand > MaxInFlight || e.Refusing < 0 || e.Refusing > MaxInFlight {
				t.Fatalf("accepted entry %+v", e)
			}
		}
		if again := gaugeFrame(&g); !bytes.Equal(again, b) {
			var back GaugeFrame
			if err := DecodeGauges(again, &back); err != nil || back.Seq != g.Seq || len(back.Gauges) != len(g.Gauges) {
				t.Fatalf("re-encoding an accepted frame: %v", err)
			}
		}
		var fr Frame
		if Decode(b, &fr) == nil {
			t.Fatal("a gauge frame decoded as a rate frame")
		}
	})
}
