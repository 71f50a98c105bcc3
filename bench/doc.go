// Package bench compares gopherpace with peer libraries, side by side in
// one run. It is its own module so that the peers never reach users' builds.
//
// Each comparison is a Pair of benchmark functions. `go test -bench .` runs
// them as ordinary benchmarks; `go run ./cmd/benchtable` (make bench) runs
// them through testing.Benchmark and prints a table of ratios.
package bench
