package main

import "testing"

// The demo itself, shortened: three replicas over real memberlist.
func TestClusterDemoRuns(t *testing.T) {
	if err := run(200, 3, 1, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if err := run(0, 3, 1, "127.0.0.1:0"); err == nil {
		t.Fatal("a zero rate was accepted")
	}
}
