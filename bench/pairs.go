package bench

import (
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"github.com/pedreviljoen/gopherpace/core/httplimit"
	"golang.org/x/time/rate"
)

// Pair is one comparison: ours against a peer, measured in the same run.
type Pair struct {
	Name   string
	Ours   func(*testing.B)
	Peer   func(*testing.B)
	PeerIs string
	// Target is the largest acceptable ns/op ratio ours/peer; 0 for none.
	Target float64
	// Added reports the difference in ns/op (ours − peer) instead of the
	// ratio, for overhead over a bare baseline.
	Added bool
}

// Pairs lists the comparisons in table order.
func Pairs() []Pair {
	return []Pair{
		{Name: "Allow, admit, serial", Ours: allowOurs(admitting, false), Peer: allowPeer(admitting, false), PeerIs: "x/time/rate", Target: 0.4},
		{Name: "Allow, deny, serial", Ours: allowOurs(denying, false), Peer: allowPeer(denying, false), PeerIs: "x/time/rate", Target: 0.4},
		{Name: "Allow, admit, parallel", Ours: allowOurs(admitting, true), Peer: allowPeer(admitting, true), PeerIs: "x/time/rate", Target: 0.5},
		{Name: "Allow, deny, parallel", Ours: allowOurs(denying, true), Peer: allowPeer(denying, true), PeerIs: "x/time/rate", Target: 0.5},
		{Name: "Allow, clustered vs standalone", Ours: allowClustered(false), Peer: allowOurs(admitting, false), PeerIs: "gopherpace standalone", Target: 1.2},
		{Name: "Allow, clustered, parallel", Ours: allowClustered(true), Peer: allowPeer(admitting, true), PeerIs: "x/time/rate"},
		{Name: "keyed, 1 key, parallel", Ours: keyedOurs(1), Peer: keyedPeer(1), PeerIs: "sync.Map of x/time/rate"},
		{Name: "keyed, 1k keys, parallel", Ours: keyedOurs(1_000), Peer: keyedPeer(1_000), PeerIs: "sync.Map of x/time/rate"},
		{Name: "keyed, 1M keys, parallel", Ours: keyedOurs(1_000_000), Peer: keyedPeer(1_000_000), PeerIs: "sync.Map of x/time/rate", Target: 1},
		{Name: "net/http middleware, headers off", Ours: middlewareOurs, Peer: middlewareBare, PeerIs: "bare handler", Added: true, Target: 60},
	}
}

type mode int

const (
	admitting mode = iota // every call is allowed
	denying               // every call after the first is denied
)

func allowOurs(m mode, parallel bool) func(*testing.B) {
	return func(b *testing.B) {
		opts := []gopherpace.Option{gopherpace.WithRefillRate(1_000_000_000), gopherpace.WithBucketSize(1_000_000_000)}
		if m == denying {
			opts = []gopherpace.Option{gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(1)}
		}
		l, err := gopherpace.New(opts...)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		l.Allow()
		run(b, parallel, func() bool { ok, _ := l.Allow(); return ok }, m)
	}
}

// nopTransport is a cluster of one that drops every frame: the clustered
// request path at full speed, with no network in the measurement.
type nopTransport struct{ _ byte } // not zero-sized: each is a transport of its own

func (nopTransport) Name() string                          { return "solo" }
func (nopTransport) MaxFrameSize() int                     { return 1350 }
func (nopTransport) Broadcast([]byte) error                { return nil }
func (nopTransport) Subscribe(func(string, []byte)) func() { return func() {} }
func (nopTransport) Members() []string                     { return nil }
func (nopTransport) Close() error                          { return nil }

func allowClustered(parallel bool) func(*testing.B) {
	return func(b *testing.B) {
		l, err := gopherpace.New(gopherpace.WithRefillRate(1_000_000_000), gopherpace.WithBucketSize(1_000_000_000),
			gopherpace.WithTransport(&nopTransport{}))
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		run(b, parallel, func() bool { ok, _ := l.Allow(); return ok }, admitting)
	}
}

func allowPeer(m mode, parallel bool) func(*testing.B) {
	return func(b *testing.B) {
		l := rate.NewLimiter(1e9, 1e9)
		if m == denying {
			l = rate.NewLimiter(1, 1)
		}
		l.Allow()
		run(b, parallel, l.Allow, m)
	}
}

// run times f, then checks that it behaved as the mode says, so that a
// benchmark cannot silently measure the wrong path.
func run(b *testing.B, parallel bool, f func() bool, m mode) {
	b.ReportAllocs()
	var mu sync.Mutex
	allowed, total := 0, 0
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			a, n := 0, 0
			for pb.Next() {
				if f() {
					a++
				}
				n++
			}
			mu.Lock()
			allowed, total = allowed+a, total+n
			mu.Unlock()
		})
	} else {
		for b.Loop() {
			if f() {
				allowed++
			}
			total++
		}
	}
	b.StopTimer()
	if m == admitting && allowed != total {
		b.Fatalf("admit path: %d of %d allowed", allowed, total)
	}
	if m == denying && allowed > 1 {
		b.Fatalf("deny path: %d of %d allowed", allowed, total)
	}
}

var (
	keysMu   sync.Mutex
	keysFor  = map[int][]string{}
	oursFor  = map[int]*gopherpace.Limiter{}
	peersFor = map[int]*sync.Map{}
)

func keys(n int) []string {
	keysMu.Lock()
	defer keysMu.Unlock()
	if k, ok := keysFor[n]; ok {
		return k
	}
	k := make([]string, n)
	for i := range k {
		k[i] = "203.0." + strconv.Itoa(i>>8) + "." + strconv.Itoa(i&255)
	}
	keysFor[n] = k
	return k
}

// ourLimiter returns a limiter holding n live keys, built once per n.
func ourLimiter(b *testing.B, n int) *gopherpace.Limiter {
	ks := keys(n)
	keysMu.Lock()
	defer keysMu.Unlock()
	if l, ok := oursFor[n]; ok {
		return l
	}
	// 1/s with a bucket of 1e9 keeps each bucket live (not full) for the
	// whole run while admitting every request.
	l, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(1_000_000_000), gopherpace.WithMaxKeys(int64(n)+1))
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range ks {
		l.Take(k, 1)
	}
	if got := l.Stats().LiveKeys; got != int64(n) {
		b.Fatalf("fixture holds %d live keys, want %d", got, n)
	}
	oursFor[n] = l
	return l
}

func peerMap(n int) *sync.Map {
	ks := keys(n)
	keysMu.Lock()
	defer keysMu.Unlock()
	if m, ok := peersFor[n]; ok {
		return m
	}
	m := &sync.Map{}
	for _, k := range ks {
		m.Store(k, rate.NewLimiter(1, 1_000_000_000))
	}
	peersFor[n] = m
	return m
}

func keyedOurs(n int) func(*testing.B) {
	return func(b *testing.B) {
		l, ks := ourLimiter(b, n), keys(n)
		keyedRun(b, ks, func(k string) bool {
			d, err := l.Take(k, 1)
			return err == nil && d.Allowed
		})
		if got := l.Stats().LiveKeys; got != int64(n) {
			b.Fatalf("%d live keys after the run, want %d", got, n)
		}
	}
}

func keyedPeer(n int) func(*testing.B) {
	return func(b *testing.B) {
		m, ks := peerMap(n), keys(n)
		keyedRun(b, ks, func(k string) bool {
			v, ok := m.Load(k)
			if !ok {
				v, _ = m.LoadOrStore(k, rate.NewLimiter(1, 1_000_000_000))
			}
			return v.(*rate.Limiter).Allow()
		})
	}
}

// keyedRun spreads calls over the keys with a per-goroutine stride so that
// the goroutines do not walk the keys in lockstep.
func keyedRun(b *testing.B, ks []string, f func(string) bool) {
	b.ReportAllocs()
	var seed sync.Mutex
	next := 0
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		seed.Lock()
		i := next * 7919
		next++
		seed.Unlock()
		for pb.Next() {
			i = (i + 104729) % len(ks)
			if !f(ks[i]) {
				b.Error("keyed request denied")
				return
			}
		}
	})
}

// BytesPerKey measures the heap held per live key by each side at n keys,
// excluding the key strings, which both sides share.
func BytesPerKey(n int) (ours, peer float64, err error) {
	ks := keys(n)
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	l, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(1_000_000_000), gopherpace.WithMaxKeys(int64(n)+1))
	if err != nil {
		return 0, 0, err
	}
	for _, k := range ks {
		l.Take(k, 1)
	}
	if got := l.Stats().LiveKeys; got != int64(n) {
		return 0, 0, fmt.Errorf("limiter holds %d keys, want %d", got, n)
	}
	ours = float64(heap()-before) / float64(n)
	runtime.KeepAlive(l)
	l = nil

	before = heap()
	m := &sync.Map{}
	for _, k := range ks {
		m.Store(k, rate.NewLimiter(1, 1_000_000_000))
	}
	peer = float64(heap()-before) / float64(n)
	runtime.KeepAlive(m)
	return ours, peer, nil
}

// discard is a reusable ResponseWriter, so that the middleware benchmarks
// measure the middleware and not a recorder's allocations.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header       { return d.h }
func (*discard) Write(p []byte) (int, error) { return len(p), nil }
func (*discard) WriteHeader(int)             {}

// counter is the handler behind both sides; its count proves that every
// request reached it (the benchmark measured the admit path).
type counter struct{ n int }

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n++
	w.WriteHeader(http.StatusOK)
}

func serveLoop(b *testing.B, wrap func(http.Handler) http.Handler) {
	inner := &counter{}
	h := wrap(inner)
	w := &discard{h: http.Header{}}
	r, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	b.ReportAllocs()
	loops := 0
	b.ResetTimer()
	for b.Loop() {
		h.ServeHTTP(w, r)
		loops++
	}
	b.StopTimer()
	if inner.n != loops {
		b.Fatalf("%d of %d requests reached the handler", inner.n, loops)
	}
}

func middlewareBare(b *testing.B) { serveLoop(b, func(h http.Handler) http.Handler { return h }) }

func middlewareOurs(b *testing.B) {
	l, err := gopherpace.New(gopherpace.WithRefillRate(1_000_000_000), gopherpace.WithBucketSize(1_000_000_000))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	mw, err := httplimit.Build(l, httplimit.WithHeaders(headers.None), httplimit.WithKeyFunc(httplimit.GlobalKey))
	if err != nil {
		b.Fatal(err)
	}
	serveLoop(b, mw.Wrap)
}
