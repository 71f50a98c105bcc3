package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// memory sends values distinct descriptor values (user=u0, u1, …, each
// limited to 10 an hour, so that every bucket stays live) to a fresh
// gopherpace serve, standalone, and to envoyproxy/ratelimit, then reads
// each one's resident memory from /proc: ours holds every bucket in its
// own process; theirs holds its counters in Redis, whose growth is read
// the same way.
func memory(b benchEnv, callers, values int) error {
	fmt.Printf("\nResident memory after %d distinct descriptor values (user=…, 10 an hour each, all live)\n\n", values)
	fmt.Println("| server | before | after | grown | live buckets | sent in |")
	fmt.Println("|---|---|---|---|---|---|")
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	gp := b.oursCmd(ports[0], ports[1])
	stop, err := startAll([]string{"gopherpace serve"}, []string{"127.0.0.1:" + strconv.Itoa(ports[1])}, []*exec.Cmd{gp})
	if err != nil {
		return err
	}
	before := rss(gp.Process.Pid)
	took, err := sendValues("127.0.0.1:"+strconv.Itoa(ports[1]), callers, values)
	if err != nil {
		stop()
		return err
	}
	after := rss(gp.Process.Pid)
	// Prometheus writes a million as 1e+06.
	live := regexp.MustCompile(`gopherpace_keys_live\{limiter="bench.user"\} (\S+)`).FindStringSubmatch(get("http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics"))
	stop()
	liveN := "?"
	if live != nil {
		if f, err := strconv.ParseFloat(live[1], 64); err == nil {
			liveN = strconv.FormatFloat(f, 'f', 0, 64)
		}
	}
	fmt.Printf("| gopherpace serve | %s | %s | %s | %s | %v |\n", mb(before), mb(after), mb(after-before), liveN, took.Round(time.Millisecond))

	rl, _, err := b.theirsCmd(ports[2])
	if err != nil {
		return err
	}
	stop, err = startAll([]string{"envoyproxy/ratelimit"}, []string{"127.0.0.1:" + strconv.Itoa(ports[2])}, []*exec.Cmd{rl})
	if err != nil {
		return err
	}
	defer stop()
	beforeRL, beforeRedis := rss(rl.Process.Pid), rss(b.redis)
	took, err = sendValues("127.0.0.1:"+strconv.Itoa(ports[2]), callers, values)
	if err != nil {
		return err
	}
	afterRL, afterRedis := rss(rl.Process.Pid), rss(b.redis)
	fmt.Printf("| envoyproxy/ratelimit + Redis | %s + %s | %s + %s | %s | (in Redis) | %v |\n", mb(beforeRL), mb(beforeRedis),
		mb(afterRL), mb(afterRedis), mb(afterRL-beforeRL+afterRedis-beforeRedis), took.Round(time.Millisecond))
	return nil
}

// sendValues asks once for each of values distinct user values, callers
// at a time, and returns how long that took.
func sendValues(addr string, callers, values int) (time.Duration, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	c := rlspb.NewRateLimitServiceClient(conn)
	var next, failed atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	begin := time.Now()
	for range callers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(values) {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := c.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "bench", Descriptors: []*rlv3.RateLimitDescriptor{
					{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "user", Value: "u" + strconv.FormatInt(i, 10)}}}}})
				cancel()
				if err != nil && failed.Add(1) == 1 {
					mu.Lock()
					first = err
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return 0, fmt.Errorf("%d of %d requests failed, the first: %v", n, values, first)
	}
	return time.Since(begin), nil
}

// rss is a process's resident set in bytes, from /proc (0 where there is
// none).
func rss(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }
