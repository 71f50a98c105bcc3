package cluster

import "testing"

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
