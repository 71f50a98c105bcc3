package cluster

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// parts are the engine's parts (engine.go's table).
var parts = []string{"countedWord", "modeState", "sender", "receiver", "peerView", "fairShares", "keyShares", "joining"}

// A part reaches another only through the interfaces of links.go: no
// part's struct has a field that points to another part (the engine,
// which wires them, holds them all).
func TestPartsHoldNoPointerToAnother(t *testing.T) {
	t.Parallel()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, breach := range pointersToParts(f, fset) {
			t.Error(breach)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && slices.Contains(parts, ts.Name.Name) {
				seen++
			}
			return true
		})
	}
	if seen != len(parts) {
		t.Fatalf("found %d of the %d parts' types", seen, len(parts))
	}
}

// The check finds a part's field that points to another part, and passes
// an interface field and the part's own pointers.
func TestThePointerCheckFindsBreaches(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", `package p
type sender struct {
	word  *countedWord
	view  senderView
	self  *sender
	other *int
}`, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := pointersToParts(f, fset)
	if len(got) != 1 || !strings.Contains(got[0], "sender.word points to countedWord") {
		t.Fatalf("breaches %q, want the one of sender.word", got)
	}
}

// pointersToParts lists the fields of a part's struct in f whose type
// points to another part.
func pointersToParts(f *ast.File, fset *token.FileSet) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || !slices.Contains(parts, ts.Name.Name) {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return true
		}
		for _, field := range st.Fields.List {
			star, ok := field.Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			id, ok := star.X.(*ast.Ident)
			if !ok || id.Name == ts.Name.Name || !slices.Contains(parts, id.Name) {
				continue
			}
			for _, name := range field.Names {
				out = append(out, fset.Position(field.Pos()).String()+": "+ts.Name.Name+"."+name.Name+" points to "+id.Name+"; reach it through an interface of links.go")
			}
		}
		return true
	})
	return out
}
