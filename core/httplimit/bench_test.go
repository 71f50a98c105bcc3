package httplimit

import (
	"net/http"
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header       { return d.h }
func (*discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (*discardWriter) WriteHeader(int)             {}

// BenchmarkMiddleware measures the admit path per header style, over a
// handler that does nothing.
func BenchmarkMiddleware(b *testing.B) {
	for _, tc := range []struct {
		name  string
		style headers.Style
	}{{"none", headers.None}, {"draft", headers.Draft}, {"legacy", headers.Legacy}, {"both", headers.Both}} {
		b.Run(tc.name, func(b *testing.B) {
			l, err := gopherpace.New(gopherpace.WithRefillRate(1_000_000_000), gopherpace.WithBucketSize(1_000_000_000))
			if err != nil {
				b.Fatal(err)
			}
			mw, err := New(l, WithHeaders(tc.style))
			if err != nil {
				b.Fatal(err)
			}
			served := 0
			h := mw.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
			w := &discardWriter{h: http.Header{}}
			r, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
			if served != b.N {
				b.Fatalf("%d of %d requests served", served, b.N)
			}
		})
	}
}
