package fleet

import (
	"math"
	"testing"
	"time"
)

// A replica is judged against the cluster's admit ratio in the seconds it
// served: one that served only while the cluster admitted little is not
// called unfair for it, and one that admitted twice its due is.
func TestResultComparesEachSecondWithTheCluster(t *testing.T) {
	c := &Counts{start: time.Now(), offered: map[string][]int64{}, admitted: map[string][]int64{}}
	set := func(who string, offered, admitted []int64) { c.offered[who], c.admitted[who] = offered, admitted }
	// Second 0: the cluster admits half; second 1: a tenth.
	set("s0", []int64{100, 100}, []int64{50, 10})
	set("s1", []int64{100, 100}, []int64{50, 10})
	set("late", []int64{0, 100}, []int64{0, 10})   // served only in second 1, at its due
	set("greedy", []int64{0, 100}, []int64{0, 20}) // twice its due in second 1
	c.failed.Add(3)
	r := c.Result(200)
	want := map[string]float64{"s0": 1, "s1": 1, "late": 1, "greedy": 2}
	// The cluster's ratio in second 1 counts greedy's admits too: 50/400.
	want["s0"] = 60 / (50 + 100*50.0/400)
	want["s1"] = want["s0"]
	want["late"] = 10 / (100 * 50.0 / 400)
	want["greedy"] = 20 / (100 * 50.0 / 400)
	for who, w := range want {
		if math.Abs(r.Ratios[who]-w) > 1e-9 {
			t.Errorf("%s: ratio %.4f, want %.4f", who, r.Ratios[who], w)
		}
	}
	if r.Admitted != 150 || r.Total != 0.75 || r.Failed != 3 {
		t.Errorf("admitted %d, total %.3f, failed %d; want 150, 0.75, 3", r.Admitted, r.Total, r.Failed)
	}
	if got := r.Spread(); got != "0.80–1.60" {
		t.Errorf("spread %s, want 0.80–1.60", got)
	}
}
