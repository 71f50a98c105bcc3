package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// accuracy runs three replicas of each server behind round-robin (each
// decision goes to the next replica, as a gRPC client balancing over a
// headless Service does) and offers one shared limit, R = B = 200 a
// second (shared=acme), 5×R as Poisson arrivals for d. Theirs are three
// envoyproxy/ratelimit processes counting in one Redis; ours are three
// gopherpace serve clustered over memberlist on loopback. It reports the
// total admitted against R·t+B, the most admitted in any one second
// (sliding), and each replica's admit ratio against the cluster's.
func accuracy(b benchEnv, d time.Duration) error {
	fmt.Printf("\nThree replicas of each behind round-robin, one limit of R = B = %d/s offered %d/s (Poisson) for %v\n\n", sharedRate, sharedOffered, d)
	fmt.Println("| server | admitted vs R·t+B | most in any 1 s (R+B = " + strconv.Itoa(2*sharedRate) + ") | worst replica's admit ratio vs the cluster's | generator behind | errors |")
	fmt.Println("|---|---|---|---|---|---|")
	ports, err := freePorts(9)
	if err != nil {
		return err
	}
	// Theirs.
	var cmds []*exec.Cmd
	var addrs, names []string
	for i := range 3 {
		c, _, err := b.theirsCmd(ports[i])
		if err != nil {
			return err
		}
		cmds, addrs, names = append(cmds, c), append(addrs, "127.0.0.1:"+strconv.Itoa(ports[i])), append(names, "envoyproxy/ratelimit "+strconv.Itoa(i))
	}
	stop, err := startAll(names, addrs, cmds)
	if err != nil {
		return err
	}
	err = measureReplicas("envoyproxy/ratelimit ×3 + one Redis", addrs, d)
	stop()
	if err != nil {
		return err
	}
	// Ours: gossip ports first, the first replica the seed of the others.
	cmds, addrs, names = nil, nil, nil
	seed := "127.0.0.1:" + strconv.Itoa(ports[6])
	var httpAddrs []string
	for i := range 3 {
		httpPort, grpcPort, gossipPort := ports[3+i], ports[i], ports[6+i]
		cmds = append(cmds, b.oursCmd(httpPort, grpcPort, "-bind", "127.0.0.1", "-port", strconv.Itoa(gossipPort),
			"-node", "r"+strconv.Itoa(i), "-seeds", seed))
		addrs, names = append(addrs, "127.0.0.1:"+strconv.Itoa(grpcPort)), append(names, "gopherpace serve "+strconv.Itoa(i))
		httpAddrs = append(httpAddrs, "127.0.0.1:"+strconv.Itoa(httpPort))
	}
	stop, err = startAll(names, addrs, cmds)
	if err != nil {
		return err
	}
	defer stop()
	// Measured once every replica hears the other two on the limit.
	heard := regexp.MustCompile(`gopherpace_cluster_peers\{limiter="bench.shared_acme",state="heard"\} 3`)
	for _, a := range httpAddrs {
		if err := waitFor(30*time.Second, func() bool { return heard.MatchString(get("http://" + a + "/metrics")) }); err != nil {
			return fmt.Errorf("gopherpace serve at %s never heard both peers: %w", a, err)
		}
	}
	return measureReplicas("gopherpace serve ×3 over memberlist", addrs, d)
}

// measureReplicas offers the shared limit's load round-robin over the
// replicas at addrs and prints one row.
func measureReplicas(name string, addrs []string, d time.Duration) error {
	clients := make([]rlspb.RateLimitServiceClient, len(addrs))
	for i, a := range addrs {
		conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close()
		clients[i] = rlspb.NewRateLimitServiceClient(conn)
	}
	req := &rlspb.RateLimitRequest{Domain: "bench", Descriptors: []*rlv3.RateLimitDescriptor{
		{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "shared", Value: "acme"}}}}}
	// One Poisson stream dealt round-robin; each replica's share is sent by
	// goroutines of its own, on schedule (a decision is never held up by the
	// one before it).
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	var schedule []time.Duration
	for at := time.Duration(0); ; {
		at += time.Duration(rng.ExpFloat64() / sharedOffered * float64(time.Second))
		if at >= d {
			break
		}
		schedule = append(schedule, at)
	}
	asked, admitted := make([]int, len(addrs)), make([]int, len(addrs))
	var admits []time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := 0
	var behind time.Duration
	begin := time.Now()
	for i, at := range schedule {
		if wait := at - time.Since(begin); wait > 0 {
			time.Sleep(wait)
		} else {
			behind = max(behind, -wait)
		}
		r := i % len(clients)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := clients[r].ShouldRateLimit(ctx, req)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				return
			}
			asked[r]++
			if resp.OverallCode == rlspb.RateLimitResponse_OK {
				admitted[r]++
				admits = append(admits, at)
			}
		})
	}
	wg.Wait()
	total, requests := 0, 0
	for i := range addrs {
		total, requests = total+admitted[i], requests+asked[i]
	}
	ideal := float64(sharedRate)*d.Seconds() + sharedRate
	cluster := float64(total) / float64(max(requests, 1))
	worstLo, worstHi := math.Inf(1), math.Inf(-1)
	for i := range addrs {
		r := float64(admitted[i]) / float64(max(asked[i], 1)) / cluster
		worstLo, worstHi = min(worstLo, r), max(worstHi, r)
	}
	fmt.Printf("| %s | %d of %.0f: %.4f | %d | %.2f–%.2f | %v | %d |\n", name, total, ideal, float64(total)/ideal,
		mostInAnySecond(admits), worstLo, worstHi, behind.Round(time.Millisecond), errs)
	return nil
}

// mostInAnySecond is the most admits in any window of one second, by the
// times the requests were offered at.
func mostInAnySecond(at []time.Duration) int {
	slices.Sort(at)
	most, lo := 0, 0
	for hi := range at {
		for at[hi]-at[lo] >= time.Second {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}

func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		var err error
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	return ports, nil
}

func get(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func waitFor(within time.Duration, ok func() bool) error {
	for deadline := time.Now().Add(within); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", within)
		}
	}
	return nil
}
