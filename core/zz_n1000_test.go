package gopherpace_test

import (
	"testing"
	"time"
)

func TestZZN1000(t *testing.T) {
	start := time.Now()
	c := runScenario(t, scenario{name: "N=1000", nodes: 1000, duration: 4 * time.Second}, false)
	r := c.measure()
	lo, hi := c.spread(2 * time.Second)
	var steady []float64
	for s := 1; s < 4; s++ {
		steady = append(steady, c.rate(time.Duration(s)*time.Second, time.Duration(s+1)*time.Second))
	}
	t.Logf("took %v: total %d (%+.2f%%), steady seconds %v, nodes %.2f-%.2f, %.0f dg/s, %.1f KB/s per node", time.Since(start), r.total, r.errPct, steady, lo, hi, r.peerDatagramsPerSec, r.peerBytesPerSec/1000)
}
