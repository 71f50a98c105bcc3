package gopherpace_test

import (
	"reflect"
	"slices"
	"testing"
)

// The simulator is deterministic: a scenario run twice gives the same
// result to the last token and byte, so make accuracy prints the same
// tables every time and a change in them is a change in the code. The
// scenarios with random loss, duplication and reordering, and with a
// partition, are run twice here.
func TestAccuracyIsRepeatable(t *testing.T) {
	picked := []string{"loss10+dup+reorder", "partition 3/2, 8 s"}
	ran := 0
	for _, sc := range accuracyScenarios() {
		if !slices.Contains(picked, sc.name) {
			continue
		}
		first := runScenario(t, sc, false).measure()
		second := runScenario(t, sc, false).measure()
		if !reflect.DeepEqual(first, second) {
			t.Errorf("%s ran twice differs:\n%+v\n%+v", sc.name, first, second)
		}
		ran++
	}
	if ran != len(picked) {
		t.Fatalf("ran %d of the %d scenarios picked: a name changed", ran, len(picked))
	}
}
