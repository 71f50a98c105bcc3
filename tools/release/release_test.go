package release

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every module of the repository is found, each after the siblings it
// requires, and only the libraries get tags.
func TestFindOrdersTheRepository(t *testing.T) {
	mods, err := Find(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, m := range mods {
		pos[m.Path] = i
	}
	for _, m := range mods {
		for _, s := range m.Siblings {
			if pos[s] >= pos[m.Path] {
				t.Errorf("%s comes before %s, which it requires", m.Path, s)
			}
		}
	}
	tags := Tags(mods, "v0.2.0")
	for _, want := range []string{"core/v0.2.0", "seeds/v0.2.0", "adapters/memberpace/v0.2.0", "adapters/fiberpace/v0.2.0", "adapters/otelpace/v0.2.0"} {
		if !slices.Contains(tags, want) {
			t.Errorf("no tag %s in %v", want, tags)
		}
	}
	for _, tag := range tags {
		if strings.HasPrefix(tag, "examples/") || strings.HasPrefix(tag, "bench/") || strings.HasPrefix(tag, "tools/") {
			t.Errorf("a module that is not a library is tagged: %s", tag)
		}
	}
	if tags[0] != "core/v0.2.0" {
		t.Errorf("the first tag is %s, want core's", tags[0])
	}
}

// SetVersion changes the requires of siblings and nothing else; a cycle,
// a sibling missing from the tree and a bad version are refused.
func TestSetVersionAndItsRefusals(t *testing.T) {
	root := t.TempDir()
	write := func(dir, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "go.mod"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("core", "module "+Prefix+"core\n\ngo 1.26\n")
	write("adapters/x", "module "+Prefix+"adapters/x\n\ngo 1.26\n\nrequire (\n\t"+Prefix+"core v0.0.0\n\tgolang.org/x/mod v0.43.0\n)\n\nreplace "+Prefix+"core => ../../core\n")
	write("examples", "module "+Prefix+"examples\n\ngo 1.26\n\nrequire "+Prefix+"core v0.0.0\n\nreplace "+Prefix+"core => ../core\n")
	mods, err := Find(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := Tags(mods, "v1.2.3"); !slices.Equal(got, []string{"core/v1.2.3", "adapters/x/v1.2.3"}) {
		t.Fatalf("tags %v", got)
	}
	changed, err := SetVersion(root, mods, "v1.2.3")
	if err != nil || !slices.Equal(changed, []string{"adapters/x/go.mod", "examples/go.mod"}) {
		t.Fatalf("changed %v, %v", changed, err)
	}
	// A module never published keeps its replace line.
	if data, _ := os.ReadFile(filepath.Join(root, "examples/go.mod")); !strings.Contains(string(data), "replace "+Prefix+"core => ../core") || !strings.Contains(string(data), "core v1.2.3") {
		t.Errorf("examples/go.mod after SetVersion:\n%s", data)
	}
	data, _ := os.ReadFile(filepath.Join(root, "adapters/x/go.mod"))
	for _, want := range []string{Prefix + "core v1.2.3", "golang.org/x/mod v0.43.0"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("go.mod lacks %q:\n%s", want, data)
		}
	}
	if strings.Contains(string(data), "replace") {
		t.Errorf("the released go.mod keeps a replace line (go install pkg@version would refuse it):\n%s", data)
	}
	// Back to development: the replace line again, the version kept.
	changed, err = Develop(root, mods)
	if err != nil || !slices.Equal(changed, []string{"adapters/x/go.mod"}) {
		t.Fatalf("Develop changed %v, %v", changed, err)
	}
	data, _ = os.ReadFile(filepath.Join(root, "adapters/x/go.mod"))
	for _, want := range []string{Prefix + "core v1.2.3", "replace " + Prefix + "core => ../../core"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("go.mod after Develop lacks %q:\n%s", want, data)
		}
	}
	if changed, err := Develop(root, mods); err != nil || len(changed) != 0 {
		t.Errorf("Develop a second time changed %v, %v; want nothing", changed, err)
	}
	for _, v := range []string{"1.2.3", "v1.2", "v2.0.0", "latest", ""} {
		if _, err := SetVersion(root, mods, v); err == nil {
			t.Errorf("version %q was accepted", v)
		}
	}
	write("core", "module "+Prefix+"core\n\ngo 1.26\n\nrequire "+Prefix+"adapters/x v0.0.0\n")
	if _, err := Find(root); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("a cycle: %v", err)
	}
	write("core", "module "+Prefix+"core\n\ngo 1.26\n\nrequire "+Prefix+"nowhere v0.0.0\n")
	if _, err := Find(root); err == nil || !strings.Contains(err.Error(), "not in the repository") {
		t.Errorf("a missing sibling: %v", err)
	}
}
