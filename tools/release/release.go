// Package release versions the repository's modules together: it finds
// them, orders them by what they require of each other, sets every
// require of a sibling to the version being released, and names the tags
// that publish them. docs/releasing.md says how a release is made with it
// (make release VERSION=v0.2.0).
//
// Day to day, every module reaches its siblings through replace lines and
// go.work, whatever version its requires name; a consumer ignores those,
// so what the requires name is what a consumer's go get resolves. A
// release drops the replace lines of the library modules, since go install
// pkg@version refuses a module that has any, and Develop puts them back
// once the tags are made.
package release

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// Prefix is the module path every sibling starts with.
const Prefix = "github.com/pedreviljoen/gopherpace/"

// A Module is one module of the repository.
type Module struct {
	Dir      string   // relative to the root, slash-separated: "adapters/ginpace"
	Path     string   // its module path
	Siblings []string // the module paths of the siblings it requires
	// Publish is false for the modules that are not libraries (examples,
	// bench, tools): they get the versions too, but no tags.
	Publish bool
}

// Tag is the module's tag for version: "adapters/ginpace/v0.2.0".
func (m Module) Tag(version string) string { return m.Dir + "/" + version }

// unpublished are the directories of modules that are not libraries.
var unpublished = []string{"bench", "deploy", "examples", "tools"}

// Find returns the modules under root in dependency order: each after
// every sibling it requires.
func Find(root string) ([]Module, error) {
	var mods []Module
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == ".bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := modfile.ParseLax(path, data, nil)
		if err != nil {
			return err
		}
		if f.Module == nil {
			return fmt.Errorf("%s: no module line", path)
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		m := Module{Dir: filepath.ToSlash(rel), Path: f.Module.Mod.Path, Publish: true}
		for _, u := range unpublished {
			if m.Dir == u || strings.HasPrefix(m.Dir, u+"/") {
				m.Publish = false
			}
		}
		if want := Prefix + m.Dir; m.Publish && m.Path != want {
			return fmt.Errorf("%s: module %s, want %s (the tag %s must name it)", path, m.Path, want, m.Tag("vX"))
		}
		for _, r := range f.Require {
			if strings.HasPrefix(r.Mod.Path, Prefix) {
				m.Siblings = append(m.Siblings, r.Mod.Path)
			}
		}
		mods = append(mods, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return order(mods)
}

// order sorts mods so that every module follows the siblings it requires.
func order(mods []Module) ([]Module, error) {
	slices.SortFunc(mods, func(a, b Module) int { return strings.Compare(a.Dir, b.Dir) })
	byPath := map[string]Module{}
	for _, m := range mods {
		byPath[m.Path] = m
	}
	var out []Module
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(m Module) error
	visit = func(m Module) error {
		switch state[m.Path] {
		case 1:
			return fmt.Errorf("modules require each other in a cycle through %s", m.Path)
		case 2:
			return nil
		}
		state[m.Path] = 1
		for _, s := range m.Siblings {
			dep, ok := byPath[s]
			if !ok {
				return fmt.Errorf("%s requires %s, which is not in the repository", m.Path, s)
			}
			if !dep.Publish && m.Publish {
				return fmt.Errorf("%s requires %s, which is never published", m.Path, s)
			}
			if err := visit(dep); err != nil {
				return err
			}
		}
		state[m.Path] = 2
		out = append(out, m)
		return nil
	}
	for _, m := range mods {
		if err := visit(m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CheckVersion says whether version can be released: a canonical semantic
// version of major 0 or 1 (a major above 1 would change every module path).
func CheckVersion(version string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("version %q is not a canonical semantic version (v0.2.0, v1.0.0-rc.1)", version)
	}
	if m := semver.Major(version); m != "v0" && m != "v1" {
		return errors.New("a major version above v1 changes every module path (…/v2): not supported by this procedure")
	}
	return nil
}

// SetVersion rewrites the go.mod of every module under root so that each
// require of a sibling names version, and drops the library modules'
// replace lines of siblings (go install pkg@version refuses a module with
// replace lines; the modules that are never published keep theirs). It
// returns the files it changed.
func SetVersion(root string, mods []Module, version string) ([]string, error) {
	if err := CheckVersion(version); err != nil {
		return nil, err
	}
	return edit(root, mods, func(m Module, f *modfile.File) (bool, error) {
		edited := false
		for _, r := range f.Require {
			if strings.HasPrefix(r.Mod.Path, Prefix) && r.Mod.Version != version {
				if err := f.AddRequire(r.Mod.Path, version); err != nil {
					return false, err
				}
				edited = true
			}
		}
		if !m.Publish {
			return edited, nil
		}
		for _, r := range slices.Clone(f.Replace) {
			if strings.HasPrefix(r.Old.Path, Prefix) {
				if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
					return false, err
				}
				edited = true
			}
		}
		return edited, nil
	})
}

// Develop gives every module under root a replace line for each sibling
// it requires and has none for, to the sibling's directory: after a
// release's tags, the tree builds from its own siblings again. It returns
// the files it changed.
func Develop(root string, mods []Module) ([]string, error) {
	dirOf := map[string]string{}
	for _, m := range mods {
		dirOf[m.Path] = m.Dir
	}
	return edit(root, mods, func(m Module, f *modfile.File) (bool, error) {
		edited := false
		for _, r := range f.Require {
			dir, sibling := dirOf[r.Mod.Path]
			if !sibling || slices.ContainsFunc(f.Replace, func(rep *modfile.Replace) bool { return rep.Old.Path == r.Mod.Path }) {
				continue
			}
			rel, err := filepath.Rel(filepath.FromSlash(m.Dir), filepath.FromSlash(dir))
			if err != nil {
				return false, err
			}
			if err := f.AddReplace(r.Mod.Path, "", filepath.ToSlash(rel), ""); err != nil {
				return false, err
			}
			edited = true
		}
		return edited, nil
	})
}

// edit applies change to the go.mod of every module under root and writes
// back those it changed, returning their paths.
func edit(root string, mods []Module, change func(Module, *modfile.File) (bool, error)) ([]string, error) {
	var changed []string
	for _, m := range mods {
		path := filepath.Join(root, filepath.FromSlash(m.Dir), "go.mod")
		data, err := os.ReadFile(path)
		if err != nil {
			return changed, err
		}
		f, err := modfile.Parse(path, data, nil)
		if err != nil {
			return changed, err
		}
		edited, err := change(m, f)
		if err != nil {
			return changed, err
		}
		if !edited {
			continue
		}
		f.Cleanup()
		out, err := f.Format()
		if err != nil {
			return changed, err
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return changed, err
		}
		changed = append(changed, filepath.ToSlash(filepath.Join(m.Dir, "go.mod")))
	}
	return changed, nil
}

// Tags are the tags that publish version, in dependency order.
func Tags(mods []Module, version string) []string {
	var tags []string
	for _, m := range mods {
		if m.Publish {
			tags = append(tags, m.Tag(version))
		}
	}
	return tags
}
