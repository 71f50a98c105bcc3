//go:build unix

package memberpace

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/seeds"
)

// The in-flight test's child processes are told what to be by these.
const (
	inFlightChildEnv = "MEMBERPACE_INFLIGHT_CHILD" // the seed's gossip address
	inFlightRoleEnv  = "MEMBERPACE_INFLIGHT_ROLE"  // "holder", or a loaded node's "name,weight,total weight,slot,nodes"
	inFlightShmEnv   = "MEMBERPACE_INFLIGHT_SHM"   // the shared counts' file
)

const (
	inFlightLimit = 40
	childSlots    = 5
	// shmSlots: one count per loaded process, each a word of the shared
	// file, read by every process at each of its admits.
	shmSlots = 8
)

// The phases of the load, from the parent's "go": a warm-up, then the
// judged part, then the requests still held end.
const (
	warmUp = time.Second
	judged = 6 * time.Second
	hold   = 20 * time.Millisecond
)

// sharedCounts maps the file at path: each loaded process's requests in
// flight, one word each, counted as its handlers hold them.
func sharedCounts(path string) ([]int64, func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := syscall.Mmap(int(f.Fd()), 0, 8*shmSlots, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), shmSlots), func() { _ = syscall.Munmap(b) }, nil
}

// sum is every process's requests in flight now.
func sum(counts []int64) int64 {
	var n int64
	for i := range counts {
		n += atomic.LoadInt64(&counts[i])
	}
	return n
}

// loadResult is one loaded node's part: its requests asked and let in
// while judged, and the most the cluster held at any of its admits.
type loadResult struct{ asked, let, worst int64 }

// offerLoad asks f for its part of 60 requests every 10 ms (three times
// what 40 slots of 20 ms hold), weight of total, owed by the clock so
// that a starved loop catches up in bursts rather than asking less. Each
// request let in is counted in counts[slot] for as long as it holds its
// slot; at each admit the cluster's count (every process's) is read.
func offerLoad(f *gopherpace.InFlight, weight, total int, counts []int64, slot int) loadResult {
	var r loadResult
	var wg sync.WaitGroup
	per10ms := int64(60 * weight / total)
	start, issued := time.Now(), int64(0)
	for since := time.Duration(0); since < warmUp+judged; since = time.Since(start) {
		time.Sleep(time.Millisecond)
		owed := per10ms*time.Since(start).Milliseconds()/10 - issued
		for range min(owed, 100) {
			issued++
			release, ok := f.TryAcquire("backend")
			counted := since >= warmUp
			if counted {
				r.asked++
			}
			if !ok {
				continue
			}
			atomic.AddInt64(&counts[slot], 1)
			r.worst = max(r.worst, sum(counts))
			if counted {
				r.let++
			}
			wg.Add(1)
			time.AfterFunc(hold, func() { atomic.AddInt64(&counts[slot], -1); release(); wg.Done() })
		}
	}
	wg.Wait()
	return r
}

// converged waits, up to 10 s, until f has heard every other node of
// nodes: the load starts on a cluster that knows itself.
func converged(f *gopherpace.InFlight, nodes int) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if f.Stats().Peers == nodes-1 {
			return true
		}
	}
	return false
}

// runInFlightChild is one of TestInFlightOverRealMemberlist's processes:
// a holder takes childSlots slots and keeps them until it is killed; a
// loaded node offers its load at the parent's "go" and prints its result.
func runInFlightChild() int {
	role := os.Getenv(inFlightRoleEnv)
	name := "holder"
	var weight, total, slot, nodes int
	if role != "holder" {
		parts := strings.Split(role, ",")
		name = parts[0]
		for i, to := range []*int{&weight, &total, &slot, &nodes} {
			var err error
			if *to, err = strconv.Atoi(parts[i+1]); err != nil {
				fmt.Println("error", err)
				return 1
			}
		}
	}
	tr, err := New(WithBindAddr("127.0.0.1"), WithBindPort(0), WithNodeName(name), WithProfile(ProfileFast),
		WithLogger(quiet), WithSeeds(seeds.Static{os.Getenv(inFlightChildEnv)}))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer tr.Close()
	f, err := gopherpace.NewInFlight(inFlightLimit, gopherpace.WithTransport(tr), gopherpace.WithLogger(quiet))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer f.Close()
	if role == "holder" {
		for held, deadline := 0, time.Now().Add(10*time.Second); held < childSlots && time.Now().Before(deadline); {
			if _, ok := f.TryAcquire("backend"); ok {
				held++
			}
		}
		fmt.Println("held")
		time.Sleep(time.Minute) // until killed; the test's context ends it sooner
		return 0
	}
	counts, unmap, err := sharedCounts(os.Getenv(inFlightShmEnv))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer unmap()
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "go" {
		return 1
	}
	if !converged(f, nodes) {
		fmt.Println("error: the cluster never converged")
		return 1
	}
	r := offerLoad(f, weight, total, counts, slot)
	fmt.Println(r.asked, r.let, r.worst)
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent closes it when done
	return 0
}

// Over real memberlist, 3 and then 5 processes share an in-flight limit
// of 40, each its own node on loopback: this test's and all but one of
// the others are asked at their own rates (n−1 : … : 2 : 1, three times
// the limit in all) and hold every request they let in for 20 ms; the
// last holds 5 slots. Each process counts its requests held in a word of
// a shared file: at each admit every process reads the cluster's count,
// and this one samples it every millisecond as well. The cluster never
// holds more than the Bound; each node lets in the same part of its
// requests as the cluster, within a tenth; and after the holder is
// killed (SIGKILL), its slots come back to the others within 3 s.
func TestInFlightOverRealMemberlist(t *testing.T) {
	for _, nodes := range []int{3, 5} {
		t.Run(fmt.Sprint(nodes, " nodes"), func(t *testing.T) { inFlightOverMemberlist(t, nodes) })
	}
}

func inFlightOverMemberlist(t *testing.T, nodes int) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	shm := filepath.Join(t.TempDir(), "counts")
	if err := os.WriteFile(shm, make([]byte, 8*shmSlots), 0o600); err != nil {
		t.Fatal(err)
	}
	counts, unmap, err := sharedCounts(shm)
	if err != nil {
		t.Fatal(err)
	}
	defer unmap()
	self := node(t, "p0")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type child struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Scanner
	}
	start := func(role string) child {
		cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), inFlightChildEnv+"="+self.GossipAddr(), inFlightRoleEnv+"="+role, inFlightShmEnv+"="+shm)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
		return child{cmd, in, bufio.NewScanner(pipe)}
	}
	loaded := nodes - 1 // this process and nodes−2 children; the last child holds
	total := loaded * (loaded + 1) / 2
	holder := start("holder")
	if !holder.out.Scan() || holder.out.Text() != "held" {
		t.Fatalf("the holder said %q", holder.out.Text())
	}
	atomic.StoreInt64(&counts[shmSlots-1], childSlots) // the holder's, counted for it
	var children []child
	for i := 1; i < loaded; i++ {
		c := start(fmt.Sprintf("p%d,%d,%d,%d,%d", i, loaded-i, total, i, nodes))
		if !c.out.Scan() || c.out.Text() != "ready" {
			t.Fatalf("child p%d said %q", i, c.out.Text())
		}
		children = append(children, c)
	}
	eventually(t, 10*time.Second, "every member", func() bool { return len(self.Members()) == nodes-1 })
	f, err := gopherpace.NewInFlight(inFlightLimit, gopherpace.WithTransport(self), gopherpace.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	eventually(t, 5*time.Second, "the holder's slots are heard", func() bool {
		_, cl := f.Count("backend")
		return cl == childSlots
	})
	bound := f.Bound(nodes)

	var sampled atomic.Int64
	stopSampling := make(chan struct{})
	sampling := make(chan struct{})
	go func() {
		defer close(sampling)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				if n := sum(counts); n > sampled.Load() {
					sampled.Store(n)
				}
			}
		}
	}()
	for _, c := range children {
		if _, err := io.WriteString(c.in, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	if !converged(f, nodes) {
		t.Fatalf("this node heard %d of the %d others", f.Stats().Peers, nodes-1)
	}
	results := []loadResult{offerLoad(f, loaded, total, counts, 0)}
	for i, c := range children {
		var r loadResult
		if !c.out.Scan() {
			t.Fatalf("child p%d ended without its result", i+1)
		}
		if _, err := fmt.Sscan(c.out.Text(), &r.asked, &r.let, &r.worst); err != nil {
			t.Fatalf("child p%d said %q: %v", i+1, c.out.Text(), err)
		}
		results = append(results, r)
	}
	close(stopSampling)
	<-sampling
	var sumAsked, sumLet, worst int64
	for _, r := range results {
		sumAsked, sumLet, worst = sumAsked+r.asked, sumLet+r.let, max(worst, r.worst)
	}
	cluster := float64(sumLet) / float64(sumAsked)
	t.Logf("at most %d in flight at an admit, %d sampled each millisecond (limit %d, bound %d); the cluster let in %.3f of %d requests",
		worst, sampled.Load(), inFlightLimit, bound, cluster, sumAsked)
	if worst > bound || sampled.Load() > bound {
		t.Errorf("%d in flight (%d sampled), over the bound %d", worst, sampled.Load(), bound)
	}
	if cluster > 0.8 || worst < inFlightLimit {
		t.Errorf("not the overload asked for: %.3f of the requests let in, at most %d in flight", cluster, worst)
	}
	for i, r := range results {
		if ratio := float64(r.let) / float64(r.asked); ratio < 0.9*cluster || ratio > 1.1*cluster {
			t.Errorf("node p%d let in %.3f of its requests, the cluster %.3f", i, ratio, cluster)
		}
	}

	if err := holder.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	eventually(t, 3*time.Second, "the killed node's slots come back", func() bool {
		_, cl := f.Count("backend")
		return cl == 0
	})
	t.Logf("the killed node's slots came back after %v", time.Since(killed).Round(10*time.Millisecond))
	if len(children) > 0 && !strings.Contains(strings.Join(self.Members(), ","), "p1") {
		t.Fatal("p1 left the members")
	}
}
