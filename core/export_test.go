package gopherpace

// WithFloorAtZero runs the reference design's algorithm, as the accuracy
// harness's baseline.
func WithFloorAtZero() Option { return func(c *config) { c.floorAtZero = true } }

// WireLimiterID is the 8-byte limiter identity that frames carry for id.
func WireLimiterID(id string) uint64 { return hashKey(0, id) }
