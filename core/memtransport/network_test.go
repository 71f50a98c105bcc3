package memtransport

import (
	"strings"
	"testing"
	"time"
)

type inbox struct{ got []string }

func (b *inbox) receive(from string, frame []byte) { b.got = append(b.got, from+":"+string(frame)) }

func join(t *testing.T, n *Network, name string) (*Transport, *inbox) {
	t.Helper()
	tr, err := n.Join(name)
	if err != nil {
		t.Fatal(err)
	}
	b := &inbox{}
	tr.Subscribe(b.receive)
	return tr, b
}

func TestDeliveryAfterLatencyInOrder(t *testing.T) {
	n := New(WithLatency(5*time.Millisecond, 0))
	a, _ := join(t, n, "a")
	_, bBox := join(t, n, "b")
	a.Broadcast([]byte("1"))
	a.Broadcast([]byte("2"))
	n.Advance(4 * time.Millisecond)
	if len(bBox.got) != 0 {
		t.Fatal("delivered before the latency elapsed")
	}
	n.Advance(time.Millisecond)
	if strings.Join(bBox.got, ",") != "a:1,a:2" {
		t.Fatalf("got %v", bBox.got)
	}
}

// A link's own lag adds to the network's latency on that link only.
func TestLinkLatency(t *testing.T) {
	far := func(from, to string) time.Duration {
		if (from == "c") != (to == "c") {
			return 80 * time.Millisecond
		}
		return 0
	}
	n := New(WithLatency(time.Millisecond, 0), WithLinkLatency(far))
	a, _ := join(t, n, "a")
	_, bBox := join(t, n, "b")
	_, cBox := join(t, n, "c")
	a.Broadcast([]byte("1"))
	n.Advance(time.Millisecond)
	if len(bBox.got) != 1 || len(cBox.got) != 0 {
		t.Fatalf("after 1 ms: b got %v, c got %v", bBox.got, cBox.got)
	}
	n.Advance(79 * time.Millisecond)
	if len(cBox.got) != 0 {
		t.Fatal("c got the frame before 81 ms")
	}
	n.Advance(time.Millisecond)
	if len(cBox.got) != 1 {
		t.Fatalf("c got %v after 81 ms", cBox.got)
	}
}

func TestLossAndDuplicationAreSeededAndRoughlyRight(t *testing.T) {
	count := func(seed uint64) (int, int) {
		n := New(WithRandom(seed), WithLoss(0.2), WithDuplication(0.1))
		a, _ := join(t, n, "a")
		_, box := join(t, n, "b")
		for range 10_000 {
			a.Broadcast([]byte("x"))
		}
		n.Advance(time.Second)
		return len(box.got), 0
	}
	got1, _ := count(3)
	got2, _ := count(3)
	if got1 != got2 {
		t.Fatalf("same seed, different outcomes: %d vs %d", got1, got2)
	}
	// Expected deliveries: 10000 × (0.9×0.8 + 0.1×2×0.8) = 8800.
	if got1 < 8500 || got1 > 9100 {
		t.Fatalf("%d deliveries of 10000 frames at 20%% loss, 10%% duplication", got1)
	}
}

func TestPartitionHealIsolateAndMembers(t *testing.T) {
	n := New(WithFailureDetection(time.Second))
	a, aBox := join(t, n, "a")
	b, bBox := join(t, n, "b")
	c, _ := join(t, n, "c")
	n.Partition([]string{"a"}, []string{"b"})
	a.Broadcast([]byte("cut"))
	b.Broadcast([]byte("cut"))
	n.Advance(10 * time.Millisecond)
	if len(aBox.got) != 0 || len(bBox.got) != 0 {
		t.Fatalf("crossed a cut link: %v %v", aBox.got, bBox.got)
	}
	n.Heal()
	a.Broadcast([]byte("healed"))
	n.Advance(10 * time.Millisecond)
	if len(bBox.got) != 1 {
		t.Fatalf("after heal: %v", bBox.got)
	}
	if got := strings.Join(a.Members(), ","); got != "b,c" {
		t.Fatalf("members %q", got)
	}
	c.Crash()
	if got := strings.Join(a.Members(), ","); got != "b,c" {
		t.Fatalf("a crash is noticed only after failure detection: members %q", got)
	}
	n.Advance(time.Second)
	if got := strings.Join(a.Members(), ","); got != "b" {
		t.Fatalf("after failure detection: members %q", got)
	}
	b.Close()
	if got := a.Members(); len(got) != 0 {
		t.Fatalf("a graceful leave is seen at once: members %v", got)
	}
	if _, err := n.Join("b"); err != nil {
		t.Fatalf("rejoin under the same name: %v", err)
	}
	if _, err := n.Join("a"); err == nil {
		t.Fatal("two live nodes with one name")
	}
}

func TestOversizedFrameIsRefused(t *testing.T) {
	n := New(WithMaxFrameSize(100))
	a, _ := join(t, n, "a")
	if err := a.Broadcast(make([]byte, 101)); err == nil {
		t.Fatal("oversized frame accepted")
	}
}

func TestTimersRunInTimeOrder(t *testing.T) {
	n := New()
	var order []int
	n.AfterFunc(30*time.Millisecond, func() { order = append(order, 3) })
	stop := n.AfterFunc(20*time.Millisecond, func() { order = append(order, 2) })
	n.AfterFunc(10*time.Millisecond, func() {
		order = append(order, 1)
		n.AfterFunc(5*time.Millisecond, func() { order = append(order, 15) })
	})
	if !stop() {
		t.Fatal("stop of a pending timer failed")
	}
	n.Advance(time.Second)
	if len(order) != 3 || order[0] != 1 || order[1] != 15 || order[2] != 3 {
		t.Fatalf("order %v, want [1 15 3]", order)
	}
}

func TestRealTimeDelivers(t *testing.T) {
	n := New(WithRealTime(), WithLatency(time.Millisecond, 0))
	a, _ := n.Join("a")
	b, _ := n.Join("b")
	got := make(chan string, 1)
	b.Subscribe(func(from string, frame []byte) { got <- from + ":" + string(frame) })
	fired := make(chan struct{})
	n.AfterFunc(time.Millisecond, func() { close(fired) })
	if err := a.Broadcast([]byte("x")); err != nil {
		t.Fatal(err)
	}
	<-fired
	select {
	case v := <-got:
		if v != "a:x" {
			t.Fatalf("got %q", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("frame never delivered in real time")
	}
}

// A one-way cut drops frames one way only and leaves the member lists
// alone, as memberlist's indirect probes would; Heal restores it.
func TestOneWayCut(t *testing.T) {
	n := New(WithFailureDetection(time.Second))
	a, aBox := join(t, n, "a")
	b, bBox := join(t, n, "b")
	n.Cut([]string{"a"}, []string{"b"})
	a.Broadcast([]byte("1"))
	b.Broadcast([]byte("2"))
	n.Advance(2 * time.Second)
	if len(bBox.got) != 0 || strings.Join(aBox.got, ",") != "b:2" {
		t.Fatalf("a→b cut: b got %v, a got %v", bBox.got, aBox.got)
	}
	if strings.Join(a.Members(), ",") != "b" || strings.Join(b.Members(), ",") != "a" {
		t.Fatalf("a one-way cut unlisted a member: %v %v", a.Members(), b.Members())
	}
	n.Heal()
	a.Broadcast([]byte("3"))
	n.Advance(10 * time.Millisecond)
	if strings.Join(bBox.got, ",") != "a:3" {
		t.Fatalf("after the heal b got %v", bBox.got)
	}
}

// A node's own loss applies to what it sends and what it receives, and
// not to the others' links.
func TestNodeLoss(t *testing.T) {
	n := New(WithRandom(5))
	a, aBox := join(t, n, "a")
	b, bBox := join(t, n, "b")
	c, cBox := join(t, n, "c")
	n.SetNodeLoss("a", 0.2)
	for range 10_000 {
		a.Broadcast([]byte("x"))
		b.SendTo("c", []byte("y"))
		c.SendTo("a", []byte("z"))
	}
	n.Advance(time.Second)
	if got := len(bBox.got); got < 7700 || got > 8300 {
		t.Fatalf("b got %d of 10000 frames from a at 20%% loss on a's link", got)
	}
	if got := len(aBox.got); got < 7700 || got > 8300 {
		t.Fatalf("a got %d of 10000 frames from c at 20%% loss on a's link", got)
	}
	if countFrom(cBox.got, "b") != 10000 {
		t.Fatalf("b→c lost frames: %d of 10000 arrived", countFrom(cBox.got, "b"))
	}
}

func countFrom(got []string, from string) int {
	n := 0
	for _, g := range got {
		if strings.HasPrefix(g, from+":") {
			n++
		}
	}
	return n
}
