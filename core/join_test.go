package gopherpace_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// lateList is a transport whose member list leaves a peer out for a
// while, as memberlist's does on a node that has not yet heard of a new
// member that already talks to it.
type lateList struct {
	*memtransport.Transport
	hidden atomic.Pointer[string]
}

func (l *lateList) Members() []string {
	m := l.Transport.Members()
	if h := l.hidden.Load(); h != nil {
		m = slices.DeleteFunc(m, func(s string) bool { return s == *h })
	}
	return m
}

// Keyed counts from a member that is heard before it is listed are held,
// not lost: once the member list has the sender, they are charged. (Keyed
// counts are deltas: before the hold, a join lost them once the sender's
// resends ran out, and a 5-a-minute login limit admitted 6.)
func TestCountsFromANewMemberAreHeldUntilItIsListed(t *testing.T) {
	net := memtransport.New(memtransport.WithRandom(4))
	ta, err := net.Join("a")
	if err != nil {
		t.Fatal(err)
	}
	tb, err := net.Join("b")
	if err != nil {
		t.Fatal(err)
	}
	lateB := &lateList{Transport: tb}
	hidden := "a"
	lateB.hidden.Store(&hidden)
	opts := []gopherpace.Option{gopherpace.WithRate(5, time.Minute), gopherpace.WithLogger(discardLogger)}
	a := limiterOf(t, append(opts, gopherpace.WithTransport(ta))...)
	b := limiterOf(t, append(opts, gopherpace.WithTransport(lateB))...)
	net.Advance(3 * time.Second)
	for range 3 {
		if d, _ := a.TakeAt(net.Now(), "user", 1); !d.Allowed {
			t.Fatal("a denied within the bucket")
		}
	}
	net.Advance(500 * time.Millisecond) // a's frames and all their resends have gone out
	lateB.hidden.Store(nil)
	net.Advance(200 * time.Millisecond) // b's next tick reads the member list
	admitted := 0
	for range 5 {
		if d, _ := b.TakeAt(net.Now(), "user", 1); d.Allowed {
			admitted++
		}
	}
	if admitted != 2 {
		t.Fatalf("b admitted %d of the key's 5 after a spent 3 while b did not list a; want 2", admitted)
	}
}
