package conformance

import (
	"net/http"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// BenchLimiter is the limiter every adapter benchmark spends from: so
// large and so fast to refill that every request is admitted, so that the
// benchmark measures the admit path. It is closed when b ends.
func BenchLimiter(b *testing.B) *gopherpace.Limiter {
	b.Helper()
	return newLimiter(b, gopherpace.WithRefillRate(1_000_000_000), gopherpace.WithBucketSize(1_000_000_000))
}

// BenchTake is the floor an adapter's cost is measured against, run in the
// same benchmark binary: a bare Take of key (the key the adapter's
// benchmark request maps to) from a BenchLimiter. docs/performance.md
// reports each adapter's added cost as a multiple of it.
func BenchTake(b *testing.B, key string) {
	l := BenchLimiter(b)
	b.ReportAllocs()
	for b.Loop() {
		if d, err := l.Take(key, 1); err != nil || !d.Allowed {
			b.Fatalf("Take(%q) = %+v, %v", key, d, err)
		}
	}
}

// The draft fields an adapter sends on every admit from a BenchLimiter
// (its bucket refills between requests, so one token leaves
// 999,999,999). FieldsFloor parts set them as constants, the
// framework's way: what the framework itself spends storing two
// response fields, next to what the adapter spends finding and storing
// them.
const (
	BenchPolicyField = `"default";q=1000000000;w=1`
	BenchLimitField  = `"default";r=999999999;t=1`
)

// CheckBenchFields fails b unless policy and limit, the fields an
// adapter sent in a benchmark, are BenchPolicyField and BenchLimitField:
// the fields-floor part is then like for like.
func CheckBenchFields(b *testing.B, policy, limit string) {
	b.Helper()
	if policy != BenchPolicyField || limit != BenchLimitField {
		b.Fatalf("the adapter sent RateLimit-Policy %q, RateLimit %q; the fields-floor part sets %q, %q", policy, limit, BenchPolicyField, BenchLimitField)
	}
}

// A Part is one of the things Interleave measures side by side: Serve
// does one request (or one Take).
type Part struct {
	Name  string
	Serve func()
}

// TakePart is a bare Take of key from a BenchLimiter, as a Part named
// "take": the floor of BenchTake, for Interleave.
func TakePart(b *testing.B, key string) Part {
	l := BenchLimiter(b)
	return Part{Name: "take", Serve: func() {
		if d, err := l.Take(key, 1); err != nil || !d.Allowed {
			b.Fatalf("Take(%q) = %+v, %v", key, d, err)
		}
	}}
}

// interleaveBatch is how many requests a part serves before the next
// part's turn: enough that the clock reads around a batch, and the
// caches another part left cold, cost under 1% of it; few enough (a
// batch takes well under a millisecond) that each part sees the machine
// as the others do.
const interleaveBatch = 1024

// Interleave measures parts side by side: each serves a batch of requests
// in turn, the first part of each round rotating, until each has served
// b.N. It reports each part's time per request as the metric
// "<name>-ns/op". On a shared machine whose speed drifts within seconds,
// ratios of these are steady where ratios of separate benchmarks are not:
// every part ran at the same moments.
func Interleave(b *testing.B, parts ...Part) {
	spent := make([]time.Duration, len(parts))
	b.ResetTimer()
	for done, round := 0, 0; done < b.N; done, round = done+interleaveBatch, round+1 {
		for k := range parts {
			i := (k + round) % len(parts)
			start := time.Now()
			for range interleaveBatch {
				parts[i].Serve()
			}
			spent[i] += time.Since(start)
		}
	}
	n := float64((b.N + interleaveBatch - 1) / interleaveBatch * interleaveBatch)
	for i, p := range parts {
		b.ReportMetric(float64(spent[i].Nanoseconds())/n, p.Name+"-ns/op")
	}
}

// HandlerRequest is a BenchRequest through h, whose route counts the
// requests it serves in served, with a response writer that keeps only
// the header, so that a row measures the framework and the middleware,
// not a recorder.
func HandlerRequest(h http.Handler, served *int) BenchRequest {
	w := DiscardWriter()
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = benchClient + ":1234"
	return BenchRequest{Serve: func() { h.ServeHTTP(w, r) }, Served: func() int { return *served }, Header: w.Header().Get}
}

// DiscardWriter is a reusable ResponseWriter that keeps only the header:
// what a benchmark or an allocation count serves into, so that it counts
// the middleware, not a recorder.
func DiscardWriter() http.ResponseWriter { return &discard{h: http.Header{}} }

type discard struct{ h http.Header }

func (d *discard) Header() http.Header       { return d.h }
func (*discard) Write(p []byte) (int, error) { return len(p), nil }
func (*discard) WriteHeader(int)             {}

// A BenchRequest is one GET of "/" from 192.0.2.1, served again and again
// through a framework's app and the middleware under test, to a route that
// counts it and answers 200.
type BenchRequest struct {
	Serve  func()
	Served func() int               // how many requests reached the route
	Header func(name string) string // a field of the last response
}

// MiddlewareBench is one framework's side of the middleware benchmarks
// (BenchMiddleware): M is its middleware's type, O its adapter's option.
type MiddlewareBench[M, O any] struct {
	// Prefix names the adapter's own rows: "ginpace" gives
	// "ginpace/per-ip/draft-fields"; "" gives "per-ip/draft-fields".
	Prefix string
	// Request builds a BenchRequest through mw, or through the bare app
	// when given none.
	Request func(mw ...M) BenchRequest
	// Floor is a middleware that does nothing: what any middleware costs
	// the framework, the floor of every limiter.
	Floor M
	// FieldsFloor is the floor storing the two draft fields as
	// constants, the framework's way: its own share of storing them.
	FieldsFloor func(policy, limit string) M
	// New is the adapter's constructor for inline use, and Options its
	// options in the suite's terms (only Headers and GlobalKey are used).
	New     func(*gopherpace.Limiter, ...O) M
	Options Options[O]
	// Own is the framework's own limiter, when it has one.
	Own *OwnLimiter[M]
}

// OwnLimiter is a framework's own limiter, measured beside the adapter
// sending the same fields (Style), in a row named Name.
type OwnLimiter[M any] struct {
	Name  string
	New   func() M
	Style headers.Style
}

// BenchMiddleware measures an adapter on the admit path, per client and
// with a global key, in rows every adapter has: "bare", "noop-middleware"
// (Floor), "take-same-key", "interleaved" (the floor, a bare Take, the
// adapter without and with the draft fields and the floor storing them,
// batch by batch: the ratios docs/performance.md#middleware states) and
// the adapter's own rows; with an Own limiter, it and the adapter sending
// the same fields, alone and in "interleaved/own". Every row checks that
// each request reached the route and its response carried the fields its
// style sends.
func BenchMiddleware[M, O any](b *testing.B, s MiddlewareBench[M, O]) {
	ours := func(style headers.Style, global bool) M {
		opts := []O{s.Options.Headers(style)}
		if global {
			opts = append(opts, s.Options.GlobalKey())
		}
		return s.New(BenchLimiter(b), opts...)
	}
	b.Run("bare", func(b *testing.B) { BenchRow(b, s.Request(), anyFields) })
	b.Run("noop-middleware", func(b *testing.B) { BenchRow(b, s.Request(s.Floor), anyFields) })
	b.Run("take-same-key", func(b *testing.B) { BenchTake(b, benchClient) })
	part := func(name string, mw M) Part { return Part{Name: name, Serve: s.Request(mw).Serve} }
	b.Run("interleaved", func(b *testing.B) {
		draft := s.Request(ours(headers.Draft, false))
		Interleave(b,
			part("floor", s.Floor),
			TakePart(b, benchClient),
			part("no-fields", ours(headers.None, false)),
			Part{Name: "draft-fields", Serve: draft.Serve},
			part("fields-floor", s.FieldsFloor(BenchPolicyField, BenchLimitField)),
		)
		CheckBenchFields(b, draft.Header(headers.RateLimitPolicy), draft.Header(headers.RateLimit))
	})
	rows := []headers.Style{headers.Draft, headers.None}
	if own := s.Own; own != nil {
		// Each allocates, and its collections would land on the parts of
		// "interleaved": they take turns on their own.
		b.Run("interleaved/own", func(b *testing.B) {
			Interleave(b, part("own", own.New()), part("own-ours", ours(own.Style, false)))
		})
		b.Run(own.Name, func(b *testing.B) { BenchRow(b, s.Request(own.New()), own.Style) })
		if own.Style != headers.Draft && own.Style != headers.None {
			rows = append(rows, own.Style)
		}
	}
	name := func(row string) string {
		if s.Prefix == "" {
			return row
		}
		return s.Prefix + "/" + row
	}
	for _, style := range rows {
		b.Run(name("per-ip/"+fieldsName[style]), func(b *testing.B) { BenchRow(b, s.Request(ours(style, false)), style) })
	}
	b.Run(name("global/no-fields"), func(b *testing.B) { BenchRow(b, s.Request(ours(headers.None, true)), headers.None) })
}

// benchClient is the key of a BenchRequest's client.
const benchClient = "192.0.2.1"

// fieldsName names a style's rows.
var fieldsName = map[headers.Style]string{
	headers.Draft: "draft-fields", headers.Legacy: "legacy-fields", headers.Both: "both", headers.None: "no-fields",
}

// anyFields is a style no response is checked against.
const anyFields headers.Style = 255

// fieldsSent is whether a style's responses carry the draft RateLimit
// field and the legacy X-RateLimit-Remaining.
var fieldsSent = map[headers.Style][2]bool{
	headers.Draft: {true, false}, headers.Legacy: {false, true}, headers.Both: {true, true}, headers.None: {false, false},
}

// BenchRow is one row of an adapter's benchmark: it times r, then checks
// that every request reached the route and that the last response
// carried the fields of style and no others (anyFields: no check).
func BenchRow(b *testing.B, r BenchRequest, style headers.Style) {
	b.ReportAllocs()
	loops := 0
	for b.Loop() {
		r.Serve()
		loops++
	}
	if served := r.Served(); served != loops {
		b.Fatalf("%d of %d requests reached the route", served, loops)
	}
	draft, legacy := r.Header(headers.RateLimit) != "", r.Header("X-RateLimit-Remaining") != ""
	if want, ok := fieldsSent[style]; ok && want != [2]bool{draft, legacy} {
		b.Fatalf("style %d: RateLimit sent %v, X-RateLimit-Remaining sent %v", style, draft, legacy)
	}
}
