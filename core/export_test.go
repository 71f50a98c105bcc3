package gopherpace

// WithFloorAtZero runs the reference design's algorithm, as the accuracy
// harness's baseline.
func WithFloorAtZero() Option { return func(c *config) { c.floorAtZero = true } }
