package main

import (
	"os"
	"strings"
	"testing"
)

// The README's quickstart is this program, verbatim: it compiles with the
// module, and this test fails when the two drift apart.
func TestREADMEQuickstartIsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	program, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(program)+"```\n") {
		t.Fatal("README.md's quickstart differs from examples/quickstart/main.go; change both together")
	}
}
