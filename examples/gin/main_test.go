package main

import (
	"bytes"
	"strings"
	"testing"
)

// The program's own self-test: a burst of 5 against a bucket of 3.
func TestExampleRuns(t *testing.T) {
	var out bytes.Buffer
	if err := run("127.0.0.1:0", false, &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), " 429 "); got < 1 {
		t.Fatalf("no request was limited:\n%s", out.String())
	}
	if got := strings.Count(out.String(), " 200 "); got < 3 {
		t.Fatalf("fewer than the bucket's 3 requests were served:\n%s", out.String())
	}
}
