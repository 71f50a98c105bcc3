package bench

import (
	"fmt"
	"runtime"
)

// KeyBytes is one library's heap per live key.
type KeyBytes struct {
	Name  string
	Bytes float64
}

// BytesPerKey measures the heap each keyed store holds per live key after
// n keys, each given as a fresh string as a server gets it from a request:
// a store that keeps the string pays for it. Ours comes first.
func BytesPerKey(n int) ([]KeyBytes, error) {
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var out []KeyBytes
	for _, c := range contenders() {
		if c.take == nil {
			continue
		}
		before := heap()
		take, err := c.take(keepLive, n)
		if err != nil {
			return nil, err
		}
		for i := range n {
			if !take(freshKey(i)) {
				return nil, fmt.Errorf("%s denied key %d", c.name, i)
			}
		}
		if c.live != nil {
			if got := c.live(); got != int64(n) {
				return nil, fmt.Errorf("%s holds %d keys, want %d", c.name, got, n)
			}
		}
		after := heap()
		runtime.KeepAlive(take)
		out = append(out, KeyBytes{c.name, float64(after-before) / float64(n)})
	}
	return out, nil
}
