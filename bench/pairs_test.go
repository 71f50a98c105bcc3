package bench

import "testing"

// BenchmarkPairs runs every comparison as sub-benchmarks named
// <pair>/ours and <pair>/peer.
func BenchmarkPairs(b *testing.B) {
	for _, p := range Pairs() {
		b.Run(p.Name+"/ours", p.Ours)
		b.Run(p.Name+"/peer", p.Peer)
	}
}

func TestBytesPerKeySmall(t *testing.T) {
	ours, peer, err := BytesPerKey(10_000)
	if err != nil {
		t.Fatal(err)
	}
	if ours <= 0 || peer <= 0 {
		t.Fatalf("nonsense measurement: ours %.1f, peer %.1f bytes/key", ours, peer)
	}
}
