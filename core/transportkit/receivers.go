package transportkit

import (
	"sync"
	"sync/atomic"
)

// Receivers is a ready-made subscriber list for Transport implementations:
// call Subscribe from the transport's Subscribe, and Deliver for every frame
// that arrives. The zero value is ready to use and it is safe for
// concurrent use. Deliver holds no lock while it calls the subscribers, so a
// subscriber may unsubscribe (a limiter closing) while a frame is being
// delivered to it.
type Receivers struct {
	mu   sync.Mutex // serialises changes; readers use list
	next int
	list atomic.Pointer[[]receiver]
}

type receiver struct {
	id int
	f  func(from string, frame []byte)
}

// Subscribe registers receive; the returned func removes it.
func (r *Receivers) Subscribe(receive func(from string, frame []byte)) (unsubscribe func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.next
	r.next++
	r.replaceLocked(func(old []receiver) []receiver { return append(old, receiver{id, receive}) })
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.replaceLocked(func(old []receiver) []receiver {
			out := make([]receiver, 0, len(old))
			for _, x := range old {
				if x.id != id {
					out = append(out, x)
				}
			}
			return out
		})
	}
}

// replaceLocked publishes a new list built from a copy of the current one.
func (r *Receivers) replaceLocked(change func([]receiver) []receiver) {
	var old []receiver
	if p := r.list.Load(); p != nil {
		old = *p
	}
	next := change(append([]receiver(nil), old...))
	r.list.Store(&next)
}

// Deliver hands frame from a peer to every subscriber.
func (r *Receivers) Deliver(from string, frame []byte) {
	p := r.list.Load()
	if p == nil {
		return
	}
	for _, x := range *p {
		x.f(from, frame)
	}
}
