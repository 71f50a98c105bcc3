package serviceclient

import (
	"sync"
	"time"
)

// DefaultDeniedKeys is how many keys the local "denied until" cache holds
// by default.
const DefaultDeniedKeys = 10_000

// deniedCache remembers, per key, until when the service refused it, so
// that asking again before then costs nothing. It holds at most max keys:
// when full, it first drops the refusals that have passed, then refuses
// to remember more (a key it does not hold is asked for, as without the
// cache). A nil cache holds nothing.
type deniedCache struct {
	mu    sync.Mutex
	max   int
	byKey map[string]time.Time
}

func newDeniedCache(max int) *deniedCache {
	if max == 0 {
		return nil
	}
	return &deniedCache{max: max, byKey: make(map[string]time.Time)}
}

// until reports how long key stays denied, if it does.
func (c *deniedCache) until(key string, now time.Time) (time.Duration, bool) {
	if c == nil {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.byKey[key]
	if !ok {
		return 0, false
	}
	if !u.After(now) {
		delete(c.byKey, key)
		return 0, false
	}
	return u.Sub(now), true
}

// deny remembers that key is denied until u.
func (c *deniedCache) deny(key string, u time.Time) {
	if c == nil || !u.After(time.Now()) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, held := c.byKey[key]; !held && len(c.byKey) >= c.max {
		now := time.Now()
		for k, v := range c.byKey {
			if !v.After(now) {
				delete(c.byKey, k)
			}
		}
		if len(c.byKey) >= c.max {
			return
		}
	}
	c.byKey[key] = u
}
