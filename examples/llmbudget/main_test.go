package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Each key is answered until its budget is spent, and then refused: what
// it used stays within the budget's bound (a minute's bucket and what
// refilled), plus the one answer that may overshoot it, and never less
// than the bucket it started with.
func TestBudgetsHold(t *testing.T) {
	var out strings.Builder
	const span = 2 * time.Second
	if err := run(&out, span); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	for _, key := range []string{"team-a", "team-b"} {
		var answered, refused int
		var tokens int64
		var line string
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(l, key+":") {
				line = l
			}
		}
		if _, err := fmt.Sscanf(line, key+": %d answered, %d refused, %d tokens used", &answered, &refused, &tokens); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		bound := int64(perMinute + perMinute*span.Seconds()/60 + 1200)
		if tokens > bound || tokens < perMinute || refused == 0 {
			t.Fatalf("%s used %d tokens (%d answered, %d refused); want between %d and %d, and refusals once spent",
				key, tokens, answered, refused, perMinute, bound)
		}
	}
}
