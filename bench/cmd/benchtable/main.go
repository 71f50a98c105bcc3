// Command benchtable runs the side-by-side benchmarks of package bench and
// prints one table: ns/op and allocs/op for both sides and their ratio.
package main

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/pedreviljoen/gopherpace/bench"
)

func main() {
	keys := flag.Int("bytes-keys", 1_000_000, "live keys for the bytes-per-key measurement")
	testing.Init()
	flag.Parse()

	fmt.Printf("%-34s %11s %11s %8s %8s  %-10s %s\n", "benchmark", "ours ns/op", "peer ns/op", "ratio", "target", "allocs", "peer")
	missed := 0
	for _, p := range bench.Pairs() {
		ours, peer := testing.Benchmark(p.Ours), testing.Benchmark(p.Peer)
		if ours.N == 0 || peer.N == 0 {
			fmt.Fprintf(os.Stderr, "%s: a benchmark failed\n", p.Name)
			os.Exit(1)
		}
		o, q := float64(ours.T.Nanoseconds())/float64(ours.N), float64(peer.T.Nanoseconds())/float64(peer.N)
		ratio, target, ok := fmt.Sprintf("%.2f×", o/q), "", true
		if p.Added {
			ratio = fmt.Sprintf("+%.1fns", o-q)
			if p.Target > 0 {
				target, ok = fmt.Sprintf("≤+%.0fns", p.Target), o-q <= p.Target
			}
		} else if p.Target > 0 {
			target, ok = fmt.Sprintf("≤%.2f×", p.Target), o/q <= p.Target
		}
		mark := ""
		if !ok {
			mark, missed = " MISSED", missed+1
		}
		fmt.Printf("%-34s %11.1f %11.1f %8s %8s  %4d / %-3d %s%s\n", p.Name, o, q, ratio, target, ours.AllocsPerOp(), peer.AllocsPerOp(), p.PeerIs, mark)
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
	fmt.Printf("%-34s %11.1f %11.1f %7.2f× %8s  %-10s %s%s\n", fmt.Sprintf("bytes per live key at %d", *keys), ours, peer, ours/peer, "≤48 B", "", "sync.Map of x/time/rate", mark)
	fmt.Printf("\n%d target(s) missed. Shared 2-core machines are noisy: compare ratios, not absolute numbers.\n", missed)
}
