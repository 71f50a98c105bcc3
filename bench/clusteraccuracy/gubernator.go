package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	guber "github.com/gubernator-io/gubernator/v2"
	"github.com/pedreviljoen/gopherpace/bench/clusteraccuracy/scenario"
	"github.com/sirupsen/logrus"
)

// gubernatorCluster starts n gubernator daemons in this process, on
// loopback, told of each other as its own cluster package does, with its
// production defaults (a GLOBAL sync every 100 ms, like our gossip
// interval). Each node's callers ask their own daemon, with the GLOBAL
// behaviour, for one hit of a limit of r per second (burst b).
func gubernatorCluster(n int, r, b int64, algorithm guber.Algorithm) (scenario.System, error) {
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	var daemons []*guber.Daemon
	var peers []guber.PeerInfo
	// Daemon.Close can wait forever in its GLOBAL manager once its peers
	// are gone (v2.13.0): close them all at once, and give up on the
	// stragglers after 5 s (this command exits soon after anyway).
	closeAll := func() {
		var wg sync.WaitGroup
		for _, d := range daemons {
			wg.Go(func() { d.Close() })
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}
	for range n {
		grpcAddr, err := freeLoopbackAddr()
		if err != nil {
			closeAll()
			return scenario.System{}, err
		}
		httpAddr, err := freeLoopbackAddr()
		if err != nil {
			closeAll()
			return scenario.System{}, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d, err := guber.SpawnDaemon(ctx, guber.DaemonConfig{
			Logger: logger, InstanceID: grpcAddr,
			GRPCListenAddress: grpcAddr, HTTPListenAddress: httpAddr, AdvertiseAddress: grpcAddr,
		})
		cancel()
		if err != nil {
			closeAll()
			return scenario.System{}, fmt.Errorf("gubernator daemon: %w", err)
		}
		daemons = append(daemons, d)
		peers = append(peers, guber.PeerInfo{GRPCAddress: grpcAddr, HTTPAddress: httpAddr})
	}
	for _, d := range daemons {
		d.SetPeers(peers)
	}
	clients := make([]guber.V1Client, n)
	for i, p := range peers {
		c, err := guber.DialV1Server(p.GRPCAddress, nil)
		if err != nil {
			closeAll()
			return scenario.System{}, err
		}
		clients[i] = c
	}
	name := map[guber.Algorithm]string{guber.Algorithm_TOKEN_BUCKET: "gubernator GLOBAL, token bucket", guber.Algorithm_LEAKY_BUCKET: "gubernator GLOBAL, leaky bucket"}[algorithm]
	return scenario.System{
		Name: name,
		Allow: func(node int) bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			resp, err := clients[node].GetRateLimits(ctx, &guber.GetRateLimitsReq{Requests: []*guber.RateLimitReq{{
				Name: "bench", UniqueKey: "everyone", Hits: 1, Limit: r, Burst: b, Duration: 1000, // ms
				Algorithm: algorithm, Behavior: guber.Behavior_GLOBAL,
			}}})
			return err == nil && len(resp.Responses) == 1 && resp.Responses[0].Error == "" && resp.Responses[0].Status == guber.Status_UNDER_LIMIT
		},
		Close: closeAll,
	}, nil
}

// freeLoopbackAddr asks the OS for a free loopback port. gubernator must
// be told its own address before it listens, to know which peer it is.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
