package transportkit

import (
	"sync"
	"testing"
)

// A subscriber may unsubscribe while a frame is being delivered to it, from
// another goroutine that holds a lock the delivery is waiting for: the
// shape of a limiter closing while its transport delivers a frame.
func TestReceiversUnsubscribeDuringDelivery(t *testing.T) {
	var r Receivers
	var mu sync.Mutex
	entered := make(chan struct{})
	got := 0
	unsubscribe := r.Subscribe(func(string, []byte) {
		close(entered)
		mu.Lock() // blocks until the closer below has unsubscribed
		got++
		mu.Unlock()
	})
	mu.Lock()
	done := make(chan struct{})
	go func() { r.Deliver("peer", nil); close(done) }()
	<-entered
	unsubscribe() // must not wait for the delivery in flight
	mu.Unlock()
	<-done
	r.Deliver("peer", nil) // no longer subscribed
	if got != 1 {
		t.Fatalf("delivered %d times, want 1", got)
	}
	other := 0
	r.Subscribe(func(string, []byte) { other++ })
	r.Deliver("peer", nil)
	if other != 1 || got != 1 {
		t.Fatalf("after resubscribing: %d %d", other, got)
	}
}
