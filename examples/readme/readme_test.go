package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const root = "../.."

// marker names the file a snippet comes from, on the line before its
// fence: <!-- from examples/readme/clustering.go -->.
var marker = regexp.MustCompile(`^<!-- from (\S+) -->$`)

// Every Go snippet of README.md and docs/*.md names the file it comes
// from, and is in it: a whole program is that file, byte for byte; any
// other snippet's lines are, in order, lines of that file (spacing aside).
// The files compile with the module, so every snippet does.
func TestEverySnippetIsInItsFile(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	snippets := 0
	for _, doc := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			if lines[i] != "```go" {
				continue
			}
			end := i + 1
			for end < len(lines) && lines[end] != "```" {
				end++
			}
			snippet := lines[i+1 : end]
			snippets++
			name := filepath.Base(doc) + ":" + strconv.Itoa(i+1)
			m := []string(nil)
			if i > 0 {
				m = marker.FindStringSubmatch(lines[i-1])
			}
			if m == nil {
				t.Errorf("%s: a Go snippet without a <!-- from FILE --> line before it", name)
				i = end
				continue
			}
			src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m[1])))
			if err != nil {
				t.Errorf("%s: %v", name, err)
				i = end
				continue
			}
			if len(snippet) > 0 && strings.HasPrefix(snippet[0], "package ") {
				if strings.Join(snippet, "\n")+"\n" != string(src) {
					t.Errorf("%s: the program differs from %s; change both together", name, m[1])
				}
			} else if missing := notIn(snippet, strings.Split(string(src), "\n")); missing != "" {
				t.Errorf("%s: %q is not in %s, after the snippet's lines before it", name, missing, m[1])
			}
			i = end
		}
	}
	if snippets < 10 {
		t.Fatalf("found %d Go snippets; the docs have more", snippets)
	}
}

// notIn is the first line of snippet that is not in src after the lines
// matched before it; "" when every line is.
func notIn(snippet, src []string) string {
	j := 0
	for _, line := range snippet {
		want := normal(line)
		if want == "" {
			continue
		}
		for j < len(src) && !strings.Contains(normal(src[j]), want) {
			j++
		}
		if j == len(src) {
			return strings.TrimSpace(line)
		}
		j++
	}
	return ""
}

// normal is a line with its runs of spaces and tabs made one space, and
// trimmed: gofmt aligns comments by the lines around them.
func normal(s string) string { return strings.Join(strings.Fields(s), " ") }
