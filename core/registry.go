package gopherpace

import (
	"reflect"
	"sync"
)

// Limiters that share a transport tell their frames apart by limiter ID. Two
// with one ID would each take the other's frames for a peer's, and neither
// would hold its limit, so New refuses the second. The registry below is
// process-wide: it sees every limiter created in this process.

type registration struct {
	t  Transport
	id string
}

var registry = struct {
	mu sync.Mutex
	m  map[registration]bool
}{m: map[registration]bool{}}

// register claims id on t until release is called. A transport that cannot
// be a map key (a struct holding a slice, say) is not tracked.
func register(t Transport, id string) (release func(), err error) {
	if !reflect.ValueOf(t).Comparable() {
		return func() {}, nil
	}
	r := registration{t, id}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.m[r] {
		return nil, errorf("limiter ID %q is already in use on this transport by another limiter: give each limiter that shares a transport its own WithLimiterID, the same on every node", id)
	}
	registry.m[r] = true
	return func() {
		registry.mu.Lock()
		delete(registry.m, r)
		registry.mu.Unlock()
	}, nil
}
