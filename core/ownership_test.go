package gopherpace

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// parts are, for each package of the core, the files that together hold
// one part's state (the file list atop limiter.go, the parts atop
// internal/cluster/engine.go); any other file is a part of its own.
// Across packages the compiler holds the walls.
var parts = map[string][][]string{
	".": {
		{"allow.go", "take.go"},
	},
	"internal/cluster": {
		{"decide_clustered.go", "decide_clustered_admin.go"},
		{"membership.go", "peers.go"},
		{"fairness.go", "load.go"},
	},
	"internal/bucket": {
		{"store.go", "keytable.go", "ghosts.go"},
	},
	"internal/datagram": {
		{"groups.go", "relay.go", "own_entries.go"},
	},
}

// records are types whose fields every stage fills by design: results
// handed to callers and the options.
var records = []string{
	"Decision", // filled by the decider, shadow mode and the combinators
	"Stats",    // a snapshot each part adds its numbers to
	"config",   // set by the With... options, wherever they live
}

// Each part's state is written by its own files only: every other file
// reaches it through the part's methods (docs/design.md, "Map of the
// core"). Writes are assignments to a field, ++ and --, and the mutating
// methods of sync/atomic's types; building a value with a composite
// literal is not a write.
func TestEachPartWritesOnlyItsOwnState(t *testing.T) {
	t.Parallel()
	// One importer for every package, so that the standard library is
	// type-checked from source once, not once per package.
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "source", nil)
	for dir, parts := range parts {
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		var sources []source
		for _, n := range names {
			if strings.HasSuffix(n, "_test.go") {
				continue
			}
			if ok, err := build.Default.MatchFile(dir, filepath.Base(n)); err != nil || !ok {
				continue
			}
			b, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			sources = append(sources, source{filepath.Base(n), string(b)})
		}
		if len(sources) == 0 {
			t.Fatalf("no source files in %s", dir)
		}
		breaches, err := foreignWrites(fset, imp, sources, parts, records)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, b := range breaches {
			t.Errorf("%s: %s", dir, b)
		}
	}
}

// The check finds what it is for: a file that stores into another
// part's atomic, assigns its field, or increments it; and passes a write
// from the part's own files, a method call, and a composite literal.
func TestTheOwnershipCheckFindsBreaches(t *testing.T) {
	sources := []source{
		{"counter.go", `package p
import "sync/atomic"
type counter struct { n atomic.Int64; max int; hits int }
func (c *counter) add(v int64) { c.n.Add(v) }
`},
		{"counter_view.go", `package p
func (c *counter) reset() { c.max = 0 }
`},
		{"engine.go", `package p
type engine struct { c counter }
func (e *engine) run() {
	e.c.add(1)
	e.c = counter{max: 3}
	_ = counter{hits: 1}
	e.c.n.Store(0)
	e.c.max = 9
	e.c.hits++
}
`},
	}
	fset := token.NewFileSet()
	got, err := foreignWrites(fset, importer.ForCompiler(fset, "source", nil), sources, [][]string{{"counter.go", "counter_view.go"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"engine.go:7:2: engine.go writes counter.n (counter.go's part)",
		"engine.go:8:2: engine.go writes counter.max (counter.go's part)",
		"engine.go:9:2: engine.go writes counter.hits (counter.go's part)",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("breaches:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

type source struct{ name, text string }

// foreignWrites type-checks the files (imports through imp, positions in
// fset) and lists every write to a field of a struct type from a file
// outside the part of the file declaring it, except to the records'
// fields.
func foreignWrites(fset *token.FileSet, imp types.Importer, sources []source, parts [][]string, records []string) ([]string, error) {
	var files []*ast.File
	for _, s := range sources {
		f, err := parser.ParseFile(fset, s.name, s.text, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check("p", fset, files, info); err != nil {
		return nil, err
	}
	partOf := map[string]string{}
	for _, p := range parts {
		for _, f := range p {
			partOf[f] = p[0]
		}
	}
	part := func(file string) string {
		if p, ok := partOf[file]; ok {
			return p
		}
		return file
	}
	// The part of each struct type, by where it is declared.
	owner := map[*types.TypeName]string{}
	for _, f := range files {
		file := filepath.Base(fset.Position(f.Pos()).Filename)
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if _, ok := ts.Type.(*ast.StructType); ok {
					if tn, ok := info.Defs[ts.Name].(*types.TypeName); ok {
						owner[tn] = part(file)
					}
				}
			}
			return true
		})
	}
	// field names the struct type and the field a selector writes.
	field := func(sel *ast.SelectorExpr) (*types.TypeName, string) {
		s, ok := info.Selections[sel]
		if !ok || s.Kind() != types.FieldVal {
			return nil, ""
		}
		var holder *types.TypeName
		t := s.Recv()
		for _, i := range s.Index() {
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
			}
			if n, ok := t.(*types.Named); ok {
				holder = n.Obj()
			}
			st, ok := t.Underlying().(*types.Struct)
			if !ok {
				return nil, ""
			}
			t = st.Field(i).Type()
		}
		return holder, sel.Sel.Name
	}
	var breaches []string
	check := func(file string, at token.Pos, x ast.Expr) {
		if ix, ok := ast.Unparen(x).(*ast.IndexExpr); ok {
			x = ix.X
		}
		sel, ok := ast.Unparen(x).(*ast.SelectorExpr)
		if !ok {
			return
		}
		holder, name := field(sel)
		if holder == nil || slices.Contains(records, holder.Name()) {
			return
		}
		if own, ok := owner[holder]; ok && own != part(file) {
			p := fset.Position(at)
			breaches = append(breaches, fmt.Sprintf("%s:%d:%d: %s writes %s.%s (%s's part)", file, p.Line, p.Column, file, holder.Name(), name, own))
		}
	}
	mutators := []string{"Store", "Add", "Swap", "CompareAndSwap", "And", "Or"}
	for _, f := range files {
		file := filepath.Base(fset.Position(f.Pos()).Filename)
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.AssignStmt:
				for _, l := range x.Lhs {
					check(file, x.Pos(), l)
				}
			case *ast.IncDecStmt:
				check(file, x.Pos(), x.X)
			case *ast.CallExpr:
				m, ok := x.Fun.(*ast.SelectorExpr)
				if !ok || !slices.Contains(mutators, m.Sel.Name) {
					break
				}
				if s, ok := info.Selections[m]; ok && s.Kind() == types.MethodVal {
					if pkg := s.Obj().Pkg(); pkg != nil && pkg.Path() == "sync/atomic" {
						check(file, x.Pos(), m.X)
					}
				}
			}
			return true
		})
	}
	slices.Sort(breaches)
	return breaches, nil
}
