// Command clusteraccuracy runs gubernator's GLOBAL mode (real daemons, in
// this process, on loopback) and gopherpace over real memberlist on the
// same scenarios, and prints what each cluster admitted against the
// single-bucket bound R·t + B.
//
// Each scenario offers Poisson arrivals to N nodes at several times the
// limit, uniformly or skewed, in real time. gubernator is asked over gRPC
// by each node's own callers, as its docs deploy it; gopherpace is asked
// in process, as a library is.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"

	guber "github.com/gubernator-io/gubernator/v2"
	"github.com/pedreviljoen/gopherpace/bench/clusteraccuracy/scenario"
)

func main() {
	nodes := flag.Int("nodes", 5, "cluster size")
	rate := flag.Int64("rate", 100, "the limit R, per second, cluster-wide")
	burst := flag.Int64("burst", 100, "the bucket B")
	seconds := flag.Int("seconds", 20, "length of each scenario")
	overload := flag.Float64("overload", 2, "offered load per node, in multiples of R")
	flag.Parse()
	if err := compare(*nodes, *rate, *burst, *seconds, *overload); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func compare(n int, r, b int64, seconds int, overload float64) error {
	uniform := make([]float64, n)
	skewed := make([]float64, n)
	for i := range n {
		uniform[i] = 1 / float64(n)
		skewed[i] = 0.4 / float64(n-1)
	}
	skewed[0] = 0.6
	offered := overload * float64(r) * float64(n)
	scenarios := []scenario.Scenario{
		{Name: fmt.Sprintf("uniform, %.0f×R per node", overload), Shares: uniform, Offered: offered, Seconds: seconds},
		{Name: fmt.Sprintf("skewed (60%% to one node), %.0f×R in all", overload*float64(n)), Shares: skewed, Offered: offered, Seconds: seconds},
	}
	bound := float64(r)*float64(seconds) + float64(b)
	fmt.Printf("N=%d, R=%d/s, B=%d, %d s per scenario: the bound R·t+B is %.0f\n\n", n, r, b, seconds, bound)
	fmt.Printf("%-40s %-34s %9s %9s %12s %s\n", "scenario", "system", "admitted", "of bound", "worst second", "per node")
	makers := []func() (scenario.System, error){
		func() (scenario.System, error) { return scenario.Gopherpace(n, r, b) },
		func() (scenario.System, error) { return gubernatorCluster(n, r, b, guber.Algorithm_TOKEN_BUCKET) },
		func() (scenario.System, error) { return gubernatorCluster(n, r, b, guber.Algorithm_LEAKY_BUCKET) },
	}
	for _, sc := range scenarios {
		for _, mk := range makers {
			sys, err := mk()
			if err != nil {
				return err
			}
			out := scenario.Run(sc, sys, 1)
			sys.Close()
			worst := slices.Max(out.PerSecond)
			fmt.Printf("%-40s %-34s %9d %8.3f× %9d/s  %v\n", sc.Name, sys.Name, out.Total(), float64(out.Total())/bound, worst, out.Admitted)
		}
	}
	return nil
}
