package main

import "testing"

func TestStandaloneDemoRuns(t *testing.T) {
	if err := run(100, 100, 300, 1); err != nil {
		t.Fatal(err)
	}
	if err := run(100, 100, 0, 1); err == nil {
		t.Fatal("zero offered load was accepted")
	}
}
