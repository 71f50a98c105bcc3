package scenario

import (
	"math"
	"testing"
)

// The arrivals come at the offered rate, split by the shares.
func TestArrivalsFollowTheScenario(t *testing.T) {
	sc := Scenario{Name: "skewed", Shares: []float64{0.6, 0.2, 0.2}, Offered: 3000, Seconds: 2}
	out := Run(sc, System{Name: "admit all", Allow: func(int) bool { return true }, Close: func() {}}, 7)
	if want := sc.Offered * float64(sc.Seconds); math.Abs(float64(out.Offered)-want) > 0.05*want || out.Total() != out.Offered {
		t.Fatalf("offered %d and admitted %d, want both about %.0f", out.Offered, out.Total(), want)
	}
	if share := float64(out.Admitted[0]) / float64(out.Total()); math.Abs(share-0.6) > 0.03 {
		t.Fatalf("node 0 got %.2f of the arrivals, want 0.60", share)
	}
}

// Three real memberlist nodes offered twice the limit each hold the
// cluster to R·t + B (with the slack of a run in real time on a loaded
// machine) and admit most of it.
func TestGopherpaceHoldsTheBound(t *testing.T) {
	const n, r, b, seconds = 3, 100, 100, 3
	sys, err := Gopherpace(n, r, b)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	out := Run(Scenario{Name: "uniform", Shares: []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, Offered: 2 * r * n, Seconds: seconds}, sys, 1)
	bound := float64(r*seconds + b)
	if got := float64(out.Total()); got > bound*1.02 || got < 0.8*float64(r*seconds) {
		t.Fatalf("admitted %d (per node %v), want at most %.0f and at least %d", out.Total(), out.Admitted, bound, r*seconds*8/10)
	}
}
