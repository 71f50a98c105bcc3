package gopherpace

import (
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/datagram"
	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

func BenchmarkAllow(b *testing.B) {
	l, _ := New(WithRefillRate(1_000_000_000), WithBucketSize(1_000_000_000))
	b.ReportAllocs()
	for b.Loop() {
		l.Allow()
	}
}

func BenchmarkAllowAt(b *testing.B) {
	l, _ := New(WithRefillRate(1_000_000_000), WithBucketSize(1_000_000_000))
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		l.AllowAt(now)
	}
}

func BenchmarkAllowParallel(b *testing.B) {
	l, _ := New(WithRefillRate(1_000_000_000), WithBucketSize(1_000_000_000))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Allow()
		}
	})
}

func BenchmarkTakeKeyed(b *testing.B) {
	l, _ := New(WithRefillRate(1), WithBucketSize(1_000_000))
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Take(keys[i&1023], 1)
		i++
	}
}

// BenchmarkTopKeys is keyed decisions that are all denials (the costliest
// case for the top keys, topkeys.go) without the top keys, with hashed
// keys and with keys shown.
func BenchmarkTopKeys(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	for _, c := range []struct {
		name string
		opts []Option
	}{{"off", nil}, {"hashed", []Option{WithTopKeys(false)}}, {"shown", []Option{WithTopKeys(true)}}} {
		b.Run(c.name, func(b *testing.B) {
			l, _ := New(append(c.opts, WithRate(1, time.Hour), WithBucketSize(1))...)
			defer l.Close()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l.Take(keys[i&1023], 1)
				i++
			}
		})
	}
}

// BenchmarkHashKey is the keyed hash of an address key (keyhash.go).
func BenchmarkHashKey(b *testing.B) {
	b.ReportAllocs()
	kh := bucket.RandomKeyHasher()
	var h uint64
	for b.Loop() {
		h += kh.Sum("203.0.113.195")
	}
	_ = h
}

func BenchmarkAllowClustered(b *testing.B) {
	l, _ := New(WithRefillRate(1_000_000_000), WithBucketSize(1_000_000_000), WithTransport(&nopTransport{}))
	defer l.Close()
	b.ReportAllocs()
	for b.Loop() {
		l.Allow()
	}
}

// BenchmarkLiveKeyBytes reports the heap a limiter holds per live key at
// 1M keys (B/key), at rest: a clustered limiter's counts have been sent
// and are no longer in flight. The key strings are not counted: the store
// keeps a hash. bench/ measures the standalone figure beside the peers.
func BenchmarkLiveKeyBytes(b *testing.B) {
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	const n = 1_000_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	for _, clustered := range []bool{false, true} {
		name := "standalone"
		opts := []Option{WithRate(1, 10*time.Minute), WithBucketSize(10_000), WithMaxKeys(2 * n)}
		if clustered {
			name, opts = "clustered", append(opts, WithTransport(&nopTransport{}))
		}
		b.Run(name, func(b *testing.B) {
			var perKey float64
			for b.Loop() {
				before := heap()
				l, err := New(opts...)
				if err != nil {
					b.Fatal(err)
				}
				at := time.Now()
				for _, k := range keys {
					if d, _ := l.TakeAt(at, k, 1); !d.Allowed {
						b.Fatalf("%s denied", k)
					}
				}
				if clustered {
					drainCounts(b, l)
				}
				perKey = float64(heap()-before) / n
				if got := l.Stats().LiveKeys; got != n {
					b.Fatalf("%d live keys, want %d", got, n)
				}
				l.Close()
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

// drainCounts sends a clustered limiter's unsent counts and waits until none is
// in flight, so that only what a key holds at rest is measured.
func drainCounts(b *testing.B, l *Limiter) {
	e := engineOf(l)
	e.FlushNow()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if !e.KeysBusy() {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("counts still in flight after 10s")
		}
	}
}

// BenchmarkLimits: a keyed Take from one limiter, and from two combined
// (each keyed), on the admit path.
func BenchmarkLimits(b *testing.B) {
	newL := func() *Limiter {
		l, err := New(WithRate(1_000_000_000, time.Second), WithBucketSize(1_000_000_000))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		return l
	}
	b.Run("one", func(b *testing.B) {
		l := newL()
		for b.Loop() {
			l.TakeTimed("198.51.100.1", 1)
		}
	})
	b.Run("two", func(b *testing.B) {
		ls, err := Combine(newL(), newL())
		if err != nil {
			b.Fatal(err)
		}
		keys := []string{"198.51.100.1", "api-key"}
		for b.Loop() {
			ls.TakeAll(keys, 1, nil)
		}
	})
}

// crowdTransport lists members peers and delivers nothing by itself: a
// benchmark hands its frames to the hub the limiter subscribed. Its clock
// moves only when the benchmark moves it, and never fires.
type crowdTransport struct {
	nopTransport
	members []string
	now     time.Time
	receive func(string, []byte)
}

func (c *crowdTransport) Members() []string { return c.members }
func (c *crowdTransport) Subscribe(f func(string, []byte)) func() {
	c.receive = f
	return func() {}
}
func (c *crowdTransport) Now() time.Time { return c.now }
func (*crowdTransport) AfterFunc(time.Duration, func()) func() bool {
	return func() bool { return true }
}

// crowdLimiter is a clustered limiter (R = 1000) on a crowdTransport
// that lists peers members; it closes when the benchmark ends.
func crowdLimiter(b testing.TB, peers int) (*Limiter, *crowdTransport) {
	tr := newCrowd(peers)
	return crowdLimiterOn(b, tr), tr
}

// newCrowd is a crowdTransport listing peers members.
func newCrowd(peers int) *crowdTransport {
	tr := &crowdTransport{now: time.Unix(1_700_000_000, 0)}
	for i := range peers {
		tr.members = append(tr.members, "peer-"+strconv.Itoa(i))
	}
	return tr
}

// crowdLimiterOn is a clustered limiter (R = 1000) on tr, closed when the
// benchmark ends.
func crowdLimiterOn(b testing.TB, tr Transport) *Limiter {
	l, err := New(WithRefillRate(1000), WithTransport(tr), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkReceive is the receiving side at N = 1,000: datagrams of one
// frame each from 999 listed peers in turn, each frame a peer's report of
// one more admit (the global total, the demand total and the level move),
// through the hub's split and dispatch, the engine's lock, the decoder,
// the peer's stream, its load and offsets, and the debit. The clock moves
// 1/21,000 s a frame: the all-to-all rate at N = 1,000. %core is
// what that rate costs one core.
func BenchmarkReceive(b *testing.B) {
	const peers, rate = 999, 21_000
	l, tr := crowdLimiter(b, peers)
	inc := uint64(tr.now.UnixNano())
	sums := make([]uint64, peers)
	buf := make([]byte, 0, 64)
	step := time.Second / rate
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := i % peers
		i++
		sums[p]++
		buf = wire.Encode(buf[:0], &wire.Frame{Limiter: wire.NameHash(0, DefaultLimiterID), Incarnation: inc,
			GlobalSum: sums[p], Global: 1, DemandSum: 2 * sums[p], Level: int64(p % 100)})
		tr.now = tr.now.Add(step)
		tr.receive(tr.members[p], buf)
	}
	perFrame := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perFrame*rate/1e7, "%core")
	if st := l.Stats(); st.FramesReceived != uint64(b.N) || st.FramesMalformed+st.FramesNotMember != 0 {
		b.Fatalf("%d of %d frames received, %d malformed, %d from non-members", st.FramesReceived, b.N, st.FramesMalformed, st.FramesNotMember)
	}
}

// BenchmarkTick is one tick of a node at N = 1,000 that hears all its 999
// peers: reading the member list, who is in sight, the shares from every
// peer's load, the resync, and the heartbeat. The clock moves a
// microsecond a tick, so that every peer stays freshly heard; %core is
// what 20 ticks a second (the default interval) cost one core.
func BenchmarkTick(b *testing.B) {
	const peers, ticksPerSec = 999, 20
	l, tr := crowdLimiter(b, peers)
	inc := uint64(tr.now.UnixNano())
	buf := make([]byte, 0, 64)
	// Ten reports from every peer over half a second: each peer's load is
	// measured, as in a busy cluster.
	for round := range 10 {
		for p := range peers {
			sum := uint64(round + 1)
			buf = wire.Encode(buf[:0], &wire.Frame{Limiter: wire.NameHash(0, DefaultLimiterID), Incarnation: inc,
				GlobalSum: sum, Global: 1, DemandSum: 2 * sum, Level: int64(p % 100)})
			tr.receive(tr.members[p], buf)
		}
		tr.now = tr.now.Add(50 * time.Millisecond)
	}
	e := engineOf(l)
	e.RunTick()
	if st := l.Stats(); st.HeardNodes != peers+1 {
		b.Fatalf("%d nodes heard, want %d", st.HeardNodes, peers+1)
	}
	b.ReportAllocs()
	for b.Loop() {
		tr.now = tr.now.Add(time.Microsecond)
		e.RunTick()
	}
	perTick := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perTick*ticksPerSec/1e7, "%core")
}

// crowdUnicaster is a crowdTransport that can send to one member, so
// that its hub groups the crowd (groups.go); what it sends goes nowhere.
type crowdUnicaster struct{ crowdTransport }

func (*crowdUnicaster) SendTo(string, []byte) error { return nil }

// BenchmarkReceiveRelayed is the receiving side at N = 1,000 in groups:
// datagrams of one envelope each, from a member of another group, holding
// one report of one of that group's origins, through the hub's split, the
// envelope, the dispatch and everything BenchmarkReceive counts, and
// queued to be spread to this node's 31 mates, with the spreading flush
// every 16 frames (each datagram built and handed to the transport 31
// times). The clock moves 1/7,000 s a frame: what a node receives at N =
// 1,000 in groups, about 274 KB/s of 40-byte relayed frames
// (accuracy.md#scale). %core is what that rate costs one core.
func BenchmarkReceiveRelayed(b *testing.B) {
	const rate = 7_000
	l, tr, h, others := groupedCrowd(b)
	inc := uint64(tr.now.UnixNano())
	sums := make([]uint64, len(others))
	frame, env := make([]byte, 0, 64), make([]byte, 0, 128)
	step := time.Second / rate
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := i % len(others)
		i++
		sums[p]++
		frame = wire.Encode(frame[:0], &wire.Frame{Limiter: wire.NameHash(0, DefaultLimiterID), Incarnation: inc,
			GlobalSum: sums[p], Global: 1, DemandSum: 2 * sums[p], Level: int64(p % 100)})
		env = wire.AppendRelay(env[:0], others[p], false, frame)
		tr.now = tr.now.Add(step)
		tr.receive(others[(p+1)%len(others)], env)
		if i%16 == 0 {
			h.Flush()
		}
	}
	perFrame := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perFrame*rate/1e7, "%core")
	if st := l.Stats(); st.FramesReceived != uint64(b.N) || st.FramesMalformed+st.FramesNotMember != 0 || st.RelayDropped != 0 {
		b.Fatalf("%d of %d frames received, %d malformed, %d from non-members, %d not relayed", st.FramesReceived, b.N, st.FramesMalformed, st.FramesNotMember, st.RelayDropped)
	}
}

// groupedCrowd is a limiter among 999 listed peers, in groups, with the
// peers outside its group: the origins a relay brings it frames of.
func groupedCrowd(b testing.TB) (*Limiter, *crowdUnicaster, *datagram.Hub, []string) {
	tr := &crowdUnicaster{*newCrowd(999)}
	l := crowdLimiterOn(b, tr)
	h := engineOf(l).Hub()
	h.Flush() // reads the member list: grouped
	mates := h.Mates()
	if len(mates) == 0 {
		b.Fatal("the crowd is not grouped")
	}
	var others []string
	for _, m := range tr.members {
		if !slices.Contains(mates, m) {
			others = append(others, m)
		}
	}
	return l, tr, h, others
}

// BenchmarkReceiveDigest is BenchmarkReceiveRelayed with the reports in
// digests, as relays pass running totals on: each
// datagram one digest of 8 entries (origins of another group), each entry
// turned back into its frame and taken as BenchmarkReceive counts, the
// digest queued to be spread to this node's 31 mates, with the spreading
// flush every 16 digests. The figures are per entry; the clock moves
// 1/7,000 s an entry, about what a node receives at N = 1,000
// (accuracy.md#scale). Tagged entries carry their totals truncated to 14
// bits, widened on receipt.
func BenchmarkReceiveDigest(b *testing.B) {
	const rate, perDigest = 7_000, 8
	l, tr, h, others := groupedCrowd(b)
	inc := uint64(tr.now.UnixNano())
	id, tag := wire.NameHash(0, DefaultLimiterID), wire.IncarnationTag(inc)
	sums := make([]uint64, len(others))
	entries, digest := make([]byte, 0, perDigest*wire.DigestEntryMax), make([]byte, 0, 512)
	step := time.Second / rate
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := i % len(others)
		i++
		sums[p]++
		tagged := sums[p] > 1
		bits := map[bool]uint8{true: 14}[tagged] // truncated, as a long-running relay's are
		entries = wire.AppendDigestEntry(entries, wire.Entry{Origin: wire.OriginHash(others[p]), Tagged: tagged, Tag: tag, GlobalBits: bits, DemandBits: bits}, &wire.Frame{Incarnation: inc,
			GlobalSum: sums[p], Global: 1, DemandSum: 2 * sums[p], Level: int64(p % 100)})
		tr.now = tr.now.Add(step)
		if i%perDigest == 0 {
			digest = wire.AppendDigest(digest[:0], false, id, entries)
			tr.receive(others[(p+1)%len(others)], digest)
			entries = entries[:0]
		}
		if i%(16*perDigest) == 0 {
			h.Flush()
		}
	}
	perEntry := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perEntry*rate/1e7, "%core")
	if st := l.Stats(); st.FramesReceived != uint64(b.N/perDigest*perDigest) || st.FramesMalformed+st.FramesNotMember != 0 || st.RelayDropped != 0 {
		b.Fatalf("%d of %d entries received, %d malformed, %d from non-members, %d not relayed", st.FramesReceived, b.N, st.FramesMalformed, st.FramesNotMember, st.RelayDropped)
	}
}

// An in-flight limit's take and release, standalone, against the
// smallest counting semaphore a Go program writes: a buffered channel
// (which has no keys, no stats and no cluster).
func BenchmarkInFlight(b *testing.B) {
	b.Run("gopherpace TryAcquire+release", func(b *testing.B) {
		f, err := NewInFlight(1 << 20)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			release, ok := f.TryAcquire("backend")
			if !ok {
				b.Fatal("refused")
			}
			release()
		}
	})
	b.Run("channel semaphore", func(b *testing.B) {
		sem := make(chan struct{}, 1<<20)
		b.ReportAllocs()
		for b.Loop() {
			sem <- struct{}{}
			<-sem
		}
	})
}
