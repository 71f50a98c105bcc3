// Command benchtable runs the side-by-side benchmarks of package bench and
// prints one table: ns/op and allocs/op for both sides and their ratio.
//
// Each pair runs -rounds times, ours and the peer's in turn, and the table
// shows the median of each side and the median of the per-round ratios:
// on a shared machine one round can land on a busy moment for either side.
// The range of the ratios across rounds is printed beside it.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/pedreviljoen/gopherpace/bench"
)

func main() {
	keys := flag.Int("bytes-keys", 1_000_000, "live keys for the bytes-per-key measurement")
	rounds := flag.Int("rounds", 3, "times to run each pair; the table shows medians")
	testing.Init()
	flag.Parse()
	if *rounds < 1 {
		fmt.Fprintln(os.Stderr, "-rounds must be at least 1")
		os.Exit(2)
	}

	fmt.Printf("%-34s %11s %11s %9s %8s  %-9s %-17s %s\n", "benchmark", "ours ns/op", "peer ns/op", "ratio", "target", "allocs", "range", "peer")
	missed := 0
	for _, p := range bench.Pairs() {
		var ours, peers, ratios []float64
		var oursAllocs, peerAllocs int64
		for range *rounds {
			o, q := testing.Benchmark(p.Ours), testing.Benchmark(p.Peer)
			if o.N == 0 || q.N == 0 {
				fmt.Fprintf(os.Stderr, "%s: a benchmark failed\n", p.Name)
				os.Exit(1)
			}
			on, qn := float64(o.T.Nanoseconds())/float64(o.N), float64(q.T.Nanoseconds())/float64(q.N)
			ours, peers = append(ours, on), append(peers, qn)
			if p.Added {
				ratios = append(ratios, on-qn)
			} else {
				ratios = append(ratios, on/qn)
			}
			oursAllocs, peerAllocs = max(oursAllocs, o.AllocsPerOp()), max(peerAllocs, q.AllocsPerOp())
		}
		r := median(ratios)
		ratio, spread, target, ok := fmt.Sprintf("%.2f×", r), fmt.Sprintf("%.2f–%.2f×", slices.Min(ratios), slices.Max(ratios)), "", true
		if p.Added {
			ratio, spread = fmt.Sprintf("+%.1fns", r), fmt.Sprintf("+%.1f–%.1fns", slices.Min(ratios), slices.Max(ratios))
			if p.Target > 0 {
				target, ok = fmt.Sprintf("≤+%.0fns", p.Target), r <= p.Target
			}
		} else if p.Target > 0 {
			target, ok = fmt.Sprintf("≤%.2f×", p.Target), r <= p.Target
		}
		mark := ""
		if !ok {
			mark, missed = " MISSED", missed+1
		}
		fmt.Printf("%-34s %11.1f %11.1f %9s %8s  %3d / %-3d %-17s %s%s\n", p.Name, median(ours), median(peers), ratio, target, oursAllocs, peerAllocs, spread, p.PeerIs, mark)
	}
	ours, peer, err := bench.BytesPerKey(*keys)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mark := ""
	if ours > 48 {
		mark, missed = " MISSED", missed+1
	}
	fmt.Printf("%-34s %11.1f %11.1f %8.2f× %8s  %-9s %-17s %s%s\n", fmt.Sprintf("bytes per live key at %d", *keys), ours, peer, ours/peer, "≤48 B", "", "", "sync.Map of x/time/rate", mark)
	fmt.Printf("\n%d target(s) missed. Medians of %d rounds. Shared 2-core machines are noisy: compare ratios, not absolute numbers.\n", missed, *rounds)
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
