package gopherpace

import "time"

// WithFloorAtZero runs the reference design's algorithm, as the accuracy
// harness's baseline.
func WithFloorAtZero() Option { return func(c *config) { c.floorAtZero = true } }

// WireLimiterID is the 8-byte limiter identity that frames carry for id.
func WireLimiterID(id string) uint64 { return hashKey(0, id) }

// LeaseTokens puts n fresh tokens into one of l's lease slots, as a
// processor's lease taken at time at would hold them. It reports false when
// l does not lease.
func LeaseTokens(l *Limiter, at time.Time, n int64) bool {
	if l.leases == nil {
		return false
	}
	l.leases.slots[0].word.Store(packLease(l.nanos(at), n))
	return true
}
