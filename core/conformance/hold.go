package conformance

import (
	"sync"
	"time"
)

// holds are the gates of the requests a case holds in their handler, by
// the name in their X-Hold header.
var holds = struct {
	sync.Mutex
	m map[string]chan struct{}
}{m: map[string]chan struct{}{}}

// Hold is for the handler of "/": it returns once the case lets requests
// named name go (holdRequests), at once for "" or a name no case holds,
// and after 10 s in any case, so that a broken case never hangs a server.
func Hold(name string) {
	if name == "" {
		return
	}
	holds.Lock()
	gate := holds.m[name]
	holds.Unlock()
	if gate == nil {
		return
	}
	select {
	case <-gate:
	case <-time.After(10 * time.Second):
	}
}

// holdRequests makes Hold(name) wait until the returned func is called.
func holdRequests(name string) (letGo func()) {
	gate := make(chan struct{})
	holds.Lock()
	holds.m[name] = gate
	holds.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(gate)
			holds.Lock()
			delete(holds.m, name)
			holds.Unlock()
		})
	}
}
