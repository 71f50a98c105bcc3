package readme

import (
	"encoding/base64"
	"log"
	"os"

	"github.com/pedreviljoen/gopherpace/adapters/memberpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/seeds"
)

// Clustering is README.md: clustering.
func Clustering() {
	key, err := base64.StdEncoding.DecodeString(os.Getenv("GOPHERPACE_SECRET_KEY")) // 16, 24 or 32 bytes, the same on every replica
	if err != nil {
		log.Fatal(err)
	}
	transport, err := memberpace.New(
		memberpace.WithSeeds(seeds.DNS{Host: "myservice-headless.default.svc.cluster.local", Port: 7946}),
		memberpace.WithSecretKeys(key), // required off loopback (or WithPlaintext): see docs/security.md
	)
	if err != nil {
		log.Fatal(err)
	}
	defer transport.Close()

	limiter, err := gopherpace.New(
		gopherpace.WithRefillRate(1000),     // 1000 req/s across all replicas
		gopherpace.WithTransport(transport), // how the replicas reach each other
	)
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close() // runs first: tells the peers this node is leaving
}
