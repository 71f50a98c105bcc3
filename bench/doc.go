// Package bench compares gopherpace with peer libraries, side by side in
// one run: golang.org/x/time/rate, go.uber.org/ratelimit,
// github.com/juju/ratelimit, throttled/v2 (GCRA over its map store),
// sethvargo/go-limiter (memorystore) and ulule/limiter/v3 (memory store).
// It is its own module so that the peers never reach users' builds.
//
// Each comparison is a Row: ours and every peer that can do the same
// work. `go test -bench .` runs them as ordinary benchmarks; `go run
// ./cmd/benchtable` (make bench) runs them through testing.Benchmark in
// alternating rounds and prints a table of ratios to the fastest peer.
package bench
