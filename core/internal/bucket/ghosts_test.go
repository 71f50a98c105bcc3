package bucket

import (
	"testing"
)

// A ghost gives its debt back once, to its own key only; it lapses when
// its bucket would have refilled; in a full set the smallest debt, in
// tokens, gives way to a larger one, never to a smaller.
func TestGhosts(t *testing.T) {
	var g Ghosts
	if got := g.Start(7, 100); got != 100 {
		t.Fatalf("no ghosts yet: start %d, want now", got)
	}
	g.Keep(7, 90, 100, 1, 64) // owes nothing at 100: not kept
	if got := g.Start(7, 100); got != 100 {
		t.Fatalf("a bucket that owed nothing came back at %d", got)
	}
	g.Keep(7, 500, 100, 10, 64)
	if got := g.Start(8, 100); got != 100 {
		t.Fatalf("another key took 7's ghost: %d", got)
	}
	if got := g.Start(7, 200); got != 500 {
		t.Fatalf("7 came back at %d, want its TAT of 500", got)
	}
	if got := g.Start(7, 200); got != 200 {
		t.Fatalf("7's ghost was given back twice: %d", got)
	}
	g.Keep(7, 500, 100, 10, 64)
	if got := g.Start(7, 600); got != 600 {
		t.Fatalf("a lapsed ghost set a bucket at %d, want now", got)
	}
	// Fill 7's set with four other keys' ghosts, then try to add more.
	g.Cell = make([]Ghost, 64)
	var mates []uint64
	for k := uint64(8); len(mates) < 5; k++ {
		if &g.SetOf(k)[0] == &g.SetOf(7)[0] {
			mates = append(mates, k)
		}
	}
	for i, k := range mates[:4] {
		g.Keep(k, 100+int64(i+1)*100, 100, 1, 64) // owe 100, 200, 300, 400
	}
	g.Keep(mates[4], 150, 100, 1, 64) // owes 50: fewer than any, not kept
	if got := g.Start(mates[4], 100); got != 100 {
		t.Fatalf("a smaller debt displaced a larger one: %d", got)
	}
	g.Keep(mates[4], 350, 100, 1, 64) // owes 250: displaces the one owing 100
	if g.Start(mates[0], 100) != 100 || g.Start(mates[4], 100) != 350 || g.Start(mates[1], 100) != 300 {
		t.Fatal("a full set did not give way to a larger debt, the smallest first")
	}
}
