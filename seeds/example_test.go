package seeds_test

import (
	"context"
	"fmt"

	"github.com/pedreviljoen/gopherpace/seeds"
)

// Fallback returns the first provider's answer that is not empty.
func ExampleFallback() {
	provider := seeds.Fallback{
		seeds.Static{}, // finds nothing
		seeds.Static{"10.0.0.5:7946", "10.0.0.6:7946"},
	}
	addrs, err := provider.Seeds(context.Background())
	fmt.Println(addrs, err)
	// Output: [10.0.0.5:7946 10.0.0.6:7946] <nil>
}

// In Kubernetes, point DNS at a headless Service that selects the pods;
// each ready pod has an A record.
func ExampleDNS() {
	provider := seeds.DNS{Host: "myservice-headless.default.svc.cluster.local", Port: 7946}
	addrs, err := provider.Seeds(context.Background())
	if err != nil {
		fmt.Println("no peers yet:", err)
		return
	}
	fmt.Println(addrs)
}
