package gopherpace

import "testing"

// A ghost gives its debt back once, to its own key only; it lapses when
// its bucket would have refilled; in a shared cell the larger debt, in
// tokens, stays.
func TestGhosts(t *testing.T) {
	var g ghosts
	if got := g.start(7, 100); got != 100 {
		t.Fatalf("no ghosts yet: start %d, want now", got)
	}
	g.keep(7, 90, 100, 1, 64) // owes nothing at 100: not kept
	if got := g.start(7, 100); got != 100 {
		t.Fatalf("a bucket that owed nothing came back at %d", got)
	}
	g.keep(7, 500, 100, 10, 64)
	if got := g.start(8, 100); got != 100 {
		t.Fatalf("another key took 7's ghost: %d", got)
	}
	if got := g.start(7, 200); got != 500 {
		t.Fatalf("7 came back at %d, want its TAT of 500", got)
	}
	if got := g.start(7, 200); got != 200 {
		t.Fatalf("7's ghost was given back twice: %d", got)
	}
	g.keep(7, 500, 100, 10, 64)
	if got := g.start(7, 600); got != 600 {
		t.Fatalf("a lapsed ghost set a bucket at %d, want now", got)
	}
	// Find a key sharing 7's cell, then try both orders.
	g.cell = make([]ghost, 64)
	other := uint64(8)
	for g.cellOf(other) != g.cellOf(7) {
		other++
	}
	g.keep(7, 1100, 100, 10, 64)   // 100 tokens
	g.keep(other, 400, 100, 1, 64) // 300 tokens: stays
	g.keep(7, 1100, 100, 10, 64)   // 100 tokens: does not displace it
	if got := g.start(other, 100); got != 400 {
		t.Fatalf("the larger debt was displaced: %d", got)
	}
}
