package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pedreviljoen/gopherpace/tools/release"
)

// A release in a repository of two modules: the release commit requires
// the sibling at the version with no replace line, the tag points at it,
// and the next commit has the replace line back.
func TestReleaseCommitsTagsAndGoesBackToDevelopment(t *testing.T) {
	root := t.TempDir()
	gitIn := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(dir, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "go.mod"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn("init", "-q")
	write("core", "module "+release.Prefix+"core\n\ngo 1.26\n")
	write("adapters/x", "module "+release.Prefix+"adapters/x\n\ngo 1.26\n\nrequire "+release.Prefix+"core v0.0.0\n\nreplace "+release.Prefix+"core => ../../core\n")
	gitIn("add", "-A")
	gitIn("commit", "-q", "-m", "start")
	t.Setenv("GIT_AUTHOR_NAME", "t")
	t.Setenv("GIT_AUTHOR_EMAIL", "t@example.com")
	t.Setenv("GIT_COMMITTER_NAME", "t")
	t.Setenv("GIT_COMMITTER_EMAIL", "t@example.com")

	if err := run(root, "v0.3.0", false); err != nil {
		t.Fatal(err)
	}
	released := gitIn("show", "adapters/x/v0.3.0:adapters/x/go.mod")
	if !strings.Contains(released, "core v0.3.0") || strings.Contains(released, "replace") {
		t.Errorf("the tagged go.mod:\n%s\nwant core at v0.3.0 and no replace line", released)
	}
	if gitIn("rev-parse", "core/v0.3.0^{commit}") != gitIn("rev-parse", "HEAD~1") {
		t.Error("core's tag is not on the release commit")
	}
	head, _ := os.ReadFile(filepath.Join(root, "adapters/x/go.mod"))
	if !strings.Contains(string(head), "core v0.3.0") || !strings.Contains(string(head), "replace "+release.Prefix+"core => ../../core") {
		t.Errorf("go.mod after the release:\n%s\nwant core at v0.3.0, replaced by ../../core", head)
	}
	if st := gitIn("status", "--porcelain"); st != "" {
		t.Errorf("the tree is not clean after the release:\n%s", st)
	}
	if err := run(root, "v0.3.0", true); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("releasing v0.3.0 again: %v; want the tag refused", err)
	}
}
