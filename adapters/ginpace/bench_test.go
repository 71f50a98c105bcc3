package ginpace

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// discard is a reusable ResponseWriter, so both sides measure gin and the
// middleware, not a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header       { return d.h }
func (*discard) Write(p []byte) (int, error) { return len(p), nil }
func (*discard) WriteHeader(int)             {}

func benchEngine(b *testing.B, use gin.HandlerFunc) {
	r := gin.New()
	if use != nil {
		r.Use(use)
	}
	served := 0
	r.GET("/", func(c *gin.Context) { served++; c.Status(http.StatusOK) })
	w := &discard{h: http.Header{}}
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "192.0.2.1:1234"
	b.ReportAllocs()
	loops := 0
	for b.Loop() {
		r.ServeHTTP(w, req)
		loops++
	}
	if served != loops {
		b.Fatalf("%d of %d requests reached the handler", served, loops)
	}
}

// BenchmarkGin compares a request through bare gin with one through gin and
// ginpace (global key, headers off, admit path).
func BenchmarkGin(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchEngine(b, nil) })
	b.Run("ginpace", func(b *testing.B) {
		l, _ := gopherpace.New(gopherpace.WithRefillRate(1_000_000_000), gopherpace.WithBucketSize(1_000_000_000))
		defer l.Close()
		mw, err := New(l, WithKeyFunc(GlobalKey), WithHeaders(headers.None))
		if err != nil {
			b.Fatal(err)
		}
		benchEngine(b, mw)
	})
	b.Run("ginpace-clientip", func(b *testing.B) {
		l, _ := gopherpace.New(gopherpace.WithRefillRate(1_000_000_000), gopherpace.WithBucketSize(1_000_000_000))
		defer l.Close()
		mw, err := New(l, WithHeaders(headers.None))
		if err != nil {
			b.Fatal(err)
		}
		benchEngine(b, mw)
	})
}
