package memberpace

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/seeds"
)

const inFlightChildEnv = "MEMBERPACE_INFLIGHT_CHILD"

// runInFlightChild is the node TestInFlightOverRealMemberlist kills: it
// joins the seed, takes childSlots slots and holds them until it dies.
func runInFlightChild() int {
	tr, err := New(WithBindAddr("127.0.0.1"), WithBindPort(0), WithNodeName("victim"), WithProfile(ProfileFast),
		WithLogger(quiet), WithSeeds(seeds.Static{os.Getenv(inFlightChildEnv)}))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	f, err := gopherpace.NewInFlight(inFlightLimit, gopherpace.WithTransport(tr), gopherpace.WithLogger(quiet))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	for held, deadline := 0, time.Now().Add(10*time.Second); held < childSlots && time.Now().Before(deadline); {
		if _, ok := f.TryAcquire("backend"); ok {
			held++
		}
	}
	fmt.Println("held")
	time.Sleep(time.Minute) // until killed; the test's context ends it sooner
	return 0
}

const (
	inFlightLimit = 40
	childSlots    = 5
)

// Over real memberlist, 3 and then 5 nodes share an in-flight limit of
// 40: all but one in this process, the last a separate process holding 5
// slots. Each of the others is asked at its own rate (n−1 : … : 2 : 1,
// three times the limit in all) and holds every request it lets in for
// 20 ms. Counted at every admit, the handlers never hold more than the
// Bound at once; each node lets in the same part of its requests as the
// cluster, within a tenth; and after the separate process is killed
// (SIGKILL), its slots come back to the others within 3 s.
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
	trs := []*Transport{node(t, "i0")}
	s := WithSeeds(seeds.Static{trs[0].GossipAddr()})
	for i := 1; i < nodes-1; i++ {
		trs = append(trs, node(t, fmt.Sprint("i", i), s))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), inFlightChildEnv+"="+trs[0].GossipAddr())
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	out := bufio.NewScanner(pipe)
	if !out.Scan() || out.Text() != "held" {
		t.Fatalf("the child said %q", out.Text())
	}
	var lims []*gopherpace.InFlight
	for _, tr := range trs {
		eventually(t, 10*time.Second, "every member", func() bool { return len(tr.Members()) == nodes-1 })
		f, err := gopherpace.NewInFlight(inFlightLimit, gopherpace.WithTransport(tr), gopherpace.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		lims = append(lims, f)
	}
	eventually(t, 5*time.Second, "the child's slots are heard", func() bool {
		_, cl := lims[0].Count("backend")
		return cl == childSlots
	})
	bound := lims[0].Bound(nodes)

	// The requests the handlers hold at once, counted exactly: from the
	// moment TryAcquire lets one in until just before its slot is given
	// back, the child's five included.
	var live, worst atomic.Int64
	live.Store(childSlots)
	var wg sync.WaitGroup
	k := len(lims)
	asked, let := make([]atomic.Int64, k), make([]atomic.Int64, k)
	stop := make(chan struct{})
	judged := atomic.Bool{} // the first second is the warm-up
	for i, f := range lims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Its part of 60 requests every 10 ms (three times what 40
			// slots of 20 ms hold), weighted k−i, owed by the clock: a
			// starved loop catches up in bursts rather than asking less.
			per10ms := int64(60 * (k - i) / (k * (k + 1) / 2))
			start, issued := time.Now(), int64(0)
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				owed := per10ms*time.Since(start).Milliseconds()/10 - issued
				for range min(owed, 100) {
					issued++
					release, ok := f.TryAcquire("backend")
					if judged.Load() {
						asked[i].Add(1)
					}
					if !ok {
						continue
					}
					if n := live.Add(1); n > worst.Load() {
						for w := worst.Load(); n > w && !worst.CompareAndSwap(w, n); w = worst.Load() {
						}
					}
					if judged.Load() {
						let[i].Add(1)
					}
					wg.Add(1)
					time.AfterFunc(20*time.Millisecond, func() { live.Add(-1); release(); wg.Done() })
				}
			}
		}()
	}
	time.Sleep(time.Second)
	judged.Store(true)
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	var sumAsked, sumLet int64
	for i := range k {
		sumAsked, sumLet = sumAsked+asked[i].Load(), sumLet+let[i].Load()
	}
	cluster := float64(sumLet) / float64(sumAsked)
	t.Logf("at most %d in flight (limit %d, bound %d); the cluster let in %.3f of %d requests", worst.Load(), inFlightLimit, bound, cluster, sumAsked)
	if worst.Load() > bound {
		t.Errorf("%d in flight, over the bound %d", worst.Load(), bound)
	}
	if cluster > 0.8 || worst.Load() < inFlightLimit {
		t.Errorf("not the overload asked for: %.3f of the requests let in, at most %d in flight", cluster, worst.Load())
	}
	for i := range k {
		if r := float64(let[i].Load()) / float64(asked[i].Load()); r < 0.9*cluster || r > 1.1*cluster {
			t.Errorf("node %d let in %.3f of its requests, the cluster %.3f", i, r, cluster)
		}
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	eventually(t, 3*time.Second, "the killed node's slots come back", func() bool {
		_, cl := lims[0].Count("backend")
		return cl == 0
	})
	t.Logf("the killed node's slots came back after %v", time.Since(killed).Round(10*time.Millisecond))
	if !strings.Contains(strings.Join(trs[0].Members(), ","), "i1") {
		t.Fatal("i1 left the members")
	}
}
