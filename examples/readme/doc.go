// Package readme holds the Go snippets of README.md and docs/*.md that are
// not whole programs, inside functions that give them what they use, so
// that every snippet compiles; readme_test.go checks that each snippet in
// the docs is, line for line, in the file its marker names. The whole
// programs are under examples/quickstart and examples/readme/perclient.
package readme
