package bench

import (
	"net/http"
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"github.com/pedreviljoen/gopherpace/core/httplimit"
)

// middlewareRow is what the net/http middleware adds to a bare handler,
// with no response fields, on one global bucket. It has no target: ns
// added is an absolute figure, and this VM's clock read alone moves
// between 20 and 37 ns from day to day.
func middlewareRow() Row {
	return Row{Name: "net/http middleware, headers off", Ours: Entry{"gopherpace", middlewareOurs},
		Peers: []Entry{{"bare handler", middlewareBare}}, Added: true}
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
