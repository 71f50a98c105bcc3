// Command benchtable runs the side-by-side benchmarks of package bench and
// prints one table: for each row, ours and the fastest peer (by median),
// their ratio, and every peer's median below.
//
// Each row runs -rounds times, ours and then each peer in turn, and the
// table shows medians and the median of the per-round ratios: on a shared
// machine one round can land on a busy moment for either side. A row
// whose benchmark fails is reported as failed, and the table goes on.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pedreviljoen/gopherpace/bench"
)

func main() {
	keys := flag.Int("bytes-keys", 1_000_000, "live keys for the bytes-per-key measurement")
	rounds := flag.Int("rounds", 3, "times to run each row; the table shows medians")
	only := flag.String("rows", "", "run only the rows whose name contains this")
	testing.Init()
	flag.Parse()
	if *rounds < 1 {
		fmt.Fprintln(os.Stderr, "-rounds must be at least 1")
		os.Exit(2)
	}

	fmt.Printf("%-48s %10s %10s %9s %8s %9s  %-15s %s\n", "benchmark", "ours ns/op", "peer ns/op", "ratio", "target", "allocs", "range", "fastest peer")
	missed, failed := 0, 0
	var details []string
	for _, row := range bench.Rows() {
		if !strings.Contains(row.Name, *only) {
			continue
		}
		r := measure(row, *rounds)
		if row.Release != nil {
			row.Release()
		}
		if r.err != "" {
			failed++
			fmt.Printf("%-48s FAILED: %s\n", row.Name, r.err)
			continue
		}
		ratio, spread := fmt.Sprintf("%.2f×", r.ratio), fmt.Sprintf("%.2f–%.2f×", r.lo, r.hi)
		target, ok := "", true
		if row.Added {
			ratio, spread = fmt.Sprintf("+%.1fns", r.ratio), fmt.Sprintf("+%.1f–%.1fns", r.lo, r.hi)
			if row.Target > 0 {
				target, ok = fmt.Sprintf("≤+%.0fns", row.Target), r.ratio <= row.Target
			}
		} else if row.Target > 0 {
			target, ok = fmt.Sprintf("≤%.2f×", row.Target), r.ratio <= row.Target
		}
		mark := ""
		if !ok {
			mark, missed = "  MISSED", missed+1
		}
		fmt.Printf("%-48s %10.1f %10.1f %9s %8s %4d / %-3d %-15s %s%s\n", row.Name, r.ours, r.peer, ratio, target, r.oursAllocs, r.peerAllocs, spread, r.fastest, mark)
		details = append(details, fmt.Sprintf("%-48s %s", row.Name, r.all))
	}

	sizes, err := bench.BytesPerKey(*keys)
	if err != nil {
		failed++
		fmt.Printf("%-48s FAILED: %v\n", fmt.Sprintf("bytes per live key at %d", *keys), err)
	} else {
		leanest := slices.MinFunc(sizes[1:], func(a, b bench.KeyBytes) int { return cmpFloat(a.Bytes, b.Bytes) })
		ratio := sizes[0].Bytes / leanest.Bytes
		mark := ""
		if ratio > 0.7 {
			mark, missed = "  MISSED", missed+1
		}
		fmt.Printf("%-48s %10.1f %10.1f %8.2f× %8s %9s  %-15s %s%s\n", fmt.Sprintf("bytes per live key at %d (fresh key strings)", *keys),
			sizes[0].Bytes, leanest.Bytes, ratio, "≤0.70×", "", "", leanest.Name, mark)
		var all []string
		for _, s := range sizes {
			all = append(all, fmt.Sprintf("%s %.1f", s.Name, s.Bytes))
		}
		details = append(details, fmt.Sprintf("%-48s %s", "bytes per live key", strings.Join(all, ", ")))
	}

	fmt.Printf("\nEvery contender's median ns/op (B/key for bytes):\n")
	for _, d := range details {
		fmt.Println(d)
	}
	fmt.Printf("\n%d target(s) missed, %d row(s) failed. Medians of %d rounds. Shared 2-core machines are noisy: compare ratios, not absolute numbers.\n", missed, failed, *rounds)
	if failed > 0 {
		os.Exit(1)
	}
}

type result struct {
	ours, peer, ratio, lo, hi float64
	oursAllocs, peerAllocs    int64
	fastest, all, err         string
}

// measure runs the row's rounds: ours, then each peer, in every round. A
// peer whose benchmark fails is left out of the row (and named in its
// details); the row fails only when ours or every peer does.
func measure(row bench.Row, rounds int) result {
	entries := append([]bench.Entry{row.Ours}, row.Peers...)
	ns := make([][]float64, len(entries))
	allocs := make([]int64, len(entries))
	failed := make([]bool, len(entries))
	for range rounds {
		for i, e := range entries {
			if failed[i] {
				continue
			}
			res := testing.Benchmark(e.Bench)
			if res.N == 0 {
				if i == 0 {
					return result{err: e.Name + "'s benchmark failed (run `go test -bench` in bench/ for its message)"}
				}
				failed[i] = true
				continue
			}
			ns[i] = append(ns[i], float64(res.T.Nanoseconds())/float64(res.N))
			allocs[i] = max(allocs[i], res.AllocsPerOp())
		}
	}
	fastest := 0
	for i := 1; i < len(entries); i++ {
		if !failed[i] && (fastest == 0 || median(ns[i]) < median(ns[fastest])) {
			fastest = i
		}
	}
	if fastest == 0 {
		return result{err: "every peer's benchmark failed"}
	}
	var ratios []float64
	for r := range rounds {
		if row.Added {
			ratios = append(ratios, ns[0][r]-ns[fastest][r])
		} else {
			ratios = append(ratios, ns[0][r]/ns[fastest][r])
		}
	}
	var all []string
	for i, e := range entries {
		if failed[i] {
			all = append(all, e.Name+" failed")
		} else {
			all = append(all, fmt.Sprintf("%s %.1f", e.Name, median(ns[i])))
		}
	}
	return result{ours: median(ns[0]), peer: median(ns[fastest]), ratio: median(ratios), lo: slices.Min(ratios), hi: slices.Max(ratios),
		oursAllocs: allocs[0], peerAllocs: allocs[fastest], fastest: entries[fastest].Name, all: strings.Join(all, ", ")}
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
