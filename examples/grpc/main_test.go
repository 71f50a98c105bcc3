package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestExampleRuns(t *testing.T) {
	var out bytes.Buffer
	if err := run("127.0.0.1:0", &out); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), ": OK") != 3 || strings.Count(out.String(), "ResourceExhausted  retry after") != 2 {
		t.Fatalf("want 3 OK then 2 ResourceExhausted with a retry delay:\n%s", out.String())
	}
}
