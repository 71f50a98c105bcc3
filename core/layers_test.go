package gopherpace

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// docs/design.md lists, for every package of the core module, the
// packages of the module it imports; the code must import just those, so
// that the map a newcomer reads is the one the compiler builds.
func TestTheLayersAreAsDrawn(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/pedreviljoen/gopherpace/"
	// name turns a name as the table writes it into a directory below
	// the module: core, core/adapter, internal/bucket (core's).
	name := func(s string) string {
		s = strings.TrimSuffix(strings.Trim(strings.TrimSpace(s), "`"), " (gopherpace)")
		s = strings.Trim(s, "`")
		if strings.HasPrefix(s, "internal/") || s == "transportkit" {
			return "core/" + s
		}
		return s
	}
	want := map[string][]string{}
	rows := strings.Split(string(doc), "| package | imports of the core module |\n|---|---|\n")
	if len(rows) != 2 {
		t.Fatal("design.md has no table of the core's imports")
	}
	for line := range strings.Lines(rows[1]) {
		if !strings.HasPrefix(line, "| ") {
			break
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		var imports []string
		if strings.TrimSpace(cells[1]) != "nothing" {
			for imp := range strings.SplitSeq(cells[1], ",") {
				imports = append(imports, name(imp))
			}
		}
		slices.Sort(imports)
		for pkg := range strings.SplitSeq(cells[0], ",") {
			want[name(pkg)] = imports
		}
	}
	if len(want) < 10 {
		t.Fatalf("read %d packages from design.md's table, want every package it lists", len(want))
	}
	for pkg, imports := range want {
		p, err := build.ImportDir(filepath.Join("..", pkg), 0)
		if err != nil {
			t.Errorf("%s: %v", pkg, err)
			continue
		}
		var got []string
		for _, imp := range p.Imports {
			if rest, ok := strings.CutPrefix(imp, module); ok {
				got = append(got, rest)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, imports) {
			t.Errorf("%s imports %v of the module; design.md says %v", pkg, got, imports)
		}
	}
}
