package main

import "testing"

func TestExampleRuns(t *testing.T) {
	if err := run("127.0.0.1:0", false); err != nil {
		t.Fatal(err)
	}
}
