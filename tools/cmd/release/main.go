// Command release makes a release of every module in the repository at
// one version: it checks that the tree is clean, sets every require of a
// sibling to the version and drops the library modules' replace lines,
// commits that, tags each library module in dependency order (core/v0.2.0,
// seeds/v0.2.0, adapters/ginpace/v0.2.0, ...), commits the replace lines
// back for development, and prints what to push. It runs from make release, after make
// test; docs/releasing.md has the procedure.
//
//	go run ./cmd/release -root .. -version v0.2.0 [-dry-run]
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/pedreviljoen/gopherpace/tools/release"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	version := flag.String("version", "", "the version to release, such as v0.2.0")
	dryRun := flag.Bool("dry-run", false, "print what would be done, and change nothing")
	flag.Parse()
	if err := run(*root, *version, *dryRun); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(root, version string, dryRun bool) error {
	if err := release.CheckVersion(version); err != nil {
		return err
	}
	if out, err := git(root, "status", "--porcelain"); err != nil {
		return err
	} else if out != "" {
		return errors.New("the tree has uncommitted changes; commit or stash them first:\n" + out)
	}
	mods, err := release.Find(root)
	if err != nil {
		return err
	}
	tags := release.Tags(mods, version)
	for _, t := range tags {
		if out, err := git(root, "tag", "--list", t); err != nil {
			return err
		} else if out != "" {
			return fmt.Errorf("tag %s exists already", t)
		}
	}
	if dryRun {
		fmt.Println("would set every sibling require to", version, "and tag, in order:")
		for _, t := range tags {
			fmt.Println("  " + t)
		}
		return nil
	}
	changed, err := release.SetVersion(root, mods, version)
	if err != nil {
		return err
	}
	if len(changed) > 0 {
		if _, err := git(root, append([]string{"commit", "-m", "release " + version + ": every sibling required at " + version + ", no replace lines in the libraries", "--"}, changed...)...); err != nil {
			return err
		}
	}
	for _, t := range tags {
		module := strings.TrimSuffix(t, "/"+version)
		if _, err := git(root, "tag", "-a", t, "-m", module+" "+version); err != nil {
			return err
		}
	}
	back, err := release.Develop(root, mods)
	if err != nil {
		return err
	}
	if len(back) > 0 {
		if _, err := git(root, append([]string{"commit", "-m", "after release " + version + ": siblings replaced by their directories again", "--"}, back...)...); err != nil {
			return err
		}
	}
	fmt.Printf("released %s: %d go.mod files changed, %d tags.\nPush the commits, then the tags in this order:\n\n", version, len(changed), len(tags))
	fmt.Println("  git push origin HEAD")
	for _, t := range tags {
		fmt.Println("  git push origin " + t)
	}
	return nil
}

// git runs git in root and returns its trimmed output.
func git(root string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(out.String()), nil
}
