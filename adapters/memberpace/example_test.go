package memberpace_test

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/pedreviljoen/gopherpace/adapters/memberpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/seeds"
)

// Two replicas on one machine share one limit of 100 requests per second.
// In production each replica runs one transport, usually on port 7946,
// with seeds.DNS pointing at a headless Service.
func ExampleNew() {
	first, err := memberpace.New(memberpace.WithBindAddr("127.0.0.1"), memberpace.WithBindPort(0), memberpace.WithNodeName("replica-a"))
	if err != nil {
		log.Fatal(err)
	}
	defer first.Close()
	second, err := memberpace.New(memberpace.WithBindAddr("127.0.0.1"), memberpace.WithBindPort(0), memberpace.WithNodeName("replica-b"),
		memberpace.WithSeeds(seeds.Static{first.GossipAddr()}))
	if err != nil {
		log.Fatal(err)
	}
	defer second.Close()

	limiter, err := gopherpace.New(gopherpace.WithRefillRate(100), gopherpace.WithTransport(second))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close() // runs before the transports' Close

	fmt.Println("peers of replica-b:", second.Members())
	// Output: peers of replica-b: [replica-a]
}

// Replicas tell the cluster their zone; a cluster that spans zones sends
// limiter frames across zones once, not once per replica.
func ExampleWithZone() {
	east, err := memberpace.New(memberpace.WithBindAddr("127.0.0.1"), memberpace.WithBindPort(0),
		memberpace.WithNodeName("replica-east"), memberpace.WithZone("eu-west-1a"))
	if err != nil {
		log.Fatal(err)
	}
	defer east.Close()
	west, err := memberpace.New(memberpace.WithBindAddr("127.0.0.1"), memberpace.WithBindPort(0),
		memberpace.WithNodeName("replica-west"), memberpace.WithZone("eu-west-1b"),
		memberpace.WithSeeds(seeds.Static{east.GossipAddr()}))
	if err != nil {
		log.Fatal(err)
	}
	defer west.Close()

	fmt.Println("replica-west sees replica-east in", west.Zone("replica-east"))
	// Output: replica-west sees replica-east in eu-west-1a
}

// A replica whose gossip key differs from its cluster's is refused when it
// joins: JoinError says so (and status.Ready answers 503) until it has a
// peer. The key also gives the limiters their key hash secret.
func ExampleTransport_JoinError() {
	cluster, err := memberpace.New(memberpace.WithBindAddr("127.0.0.1"), memberpace.WithBindPort(0), memberpace.WithNodeName("member"),
		memberpace.WithSecretKeys([]byte("0123456789abcdef")), memberpace.WithLogger(quiet))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	stranger, err := memberpace.New(memberpace.WithBindAddr("127.0.0.1"), memberpace.WithBindPort(0), memberpace.WithNodeName("stranger"),
		memberpace.WithSecretKeys([]byte("fedcba9876543210")), memberpace.WithSeeds(seeds.Static{cluster.GossipAddr()}),
		memberpace.WithLogger(quiet))
	if err != nil {
		log.Fatal(err)
	}
	defer stranger.Close()
	fmt.Println("member refused:", cluster.JoinError() != nil)
	fmt.Println("stranger refused:", stranger.JoinError() != nil)
	fmt.Println("key hash secrets differ:", !bytes.Equal(cluster.KeyHashSecret(), stranger.KeyHashSecret()))
	// Output:
	// member refused: false
	// stranger refused: true
	// key hash secrets differ: true
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
