package status_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
	"github.com/pedreviljoen/gopherpace/core/status"
)

// Readiness, the cluster diagnostic and the status page, next to the
// limited routes.
func Example() {
	limiter, err := gopherpace.New(gopherpace.WithRate(100, time.Second))
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	mux := http.NewServeMux()
	mux.Handle("/readyz", status.Ready(limiter))   // the readiness probe
	mux.Handle("/cluster", status.Health(limiter)) // for alerts and people
	mux.Handle("/status", status.NewPage("checkout service", limiter))

	for _, path := range []string{"/readyz", "/cluster"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		fmt.Print(path, " ", rec.Code, " ", rec.Body.String())
	}
	// Output:
	// /readyz 200 ready: deciding requests
	// /cluster 200 ok: standalone
}

// A replica stays ready while a peer is gone: only its own Close makes it
// unready.
func ExampleReady() {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	network := memtransport.New()
	var limiters []*gopherpace.Limiter
	for _, name := range []string{"a", "b", "c"} {
		tr, _ := network.Join(name)
		l, err := gopherpace.New(gopherpace.WithRate(100, time.Second), gopherpace.WithTransport(tr), gopherpace.WithLogger(quiet))
		if err != nil {
			panic(err)
		}
		defer l.Close()
		limiters = append(limiters, l)
	}
	network.Advance(time.Second)
	network.Isolate("c") // c is out of everyone's sight
	network.Advance(time.Second)
	for _, h := range []http.Handler{status.Ready(limiters[0]), status.Health(limiters[0])} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		line, _, _ := strings.Cut(strings.TrimSpace(rec.Body.String()), ";")
		fmt.Println(rec.Code, line)
	}
	limiters[0].Close()
	rec := httptest.NewRecorder()
	status.Ready(limiters[0]).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output:
	// 200 ready: deciding requests
	// 503 degraded: 2 of 3 known nodes in sight
	// 503 not ready: limiter 1 is closed
}

// A clustered node is whole while it sees every peer it knows of.
func ExampleCheck() {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	network := memtransport.New()
	var limiters []*gopherpace.Limiter
	for _, name := range []string{"a", "b"} {
		tr, _ := network.Join(name)
		l, err := gopherpace.New(gopherpace.WithRate(100, time.Second), gopherpace.WithTransport(tr), gopherpace.WithLogger(quiet))
		if err != nil {
			panic(err)
		}
		defer l.Close()
		limiters = append(limiters, l)
	}
	network.Advance(time.Second)
	fmt.Println(status.Check(limiters[0]))

	network.Partition([]string{"a"}, []string{"b"})
	network.Advance(time.Second)
	fmt.Println(status.Check(limiters[0]))
	// Output:
	// true 2 of 2 known nodes in sight
	// false 1 of 2 known nodes in sight; out of sight: b (silent for 1.024s)
}

// Two nodes of a cluster, each with its status page; node a's cluster page
// shows both views side by side.
func ExampleNewClusterPage() {
	network := memtransport.New()
	var pages []*status.Page
	for _, name := range []string{"a", "b"} {
		tr, _ := network.Join(name)
		l, err := gopherpace.New(gopherpace.WithRate(100, time.Second), gopherpace.WithTransport(tr),
			gopherpace.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			panic(err)
		}
		defer l.Close()
		pages = append(pages, status.NewPage("api", l))
	}
	network.Advance(2 * time.Second)
	b := httptest.NewServer(pages[1]) // node b's /status
	defer b.Close()
	cluster := status.NewClusterPage("api", pages[0], func() []string { return []string{b.URL} })
	w := httptest.NewRecorder()
	cluster.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/status/cluster", nil))
	fmt.Println(strings.Contains(w.Body.String(), "<th>a <small>(this node)</small></th>"), strings.Contains(w.Body.String(), "<th>b</th>"))
	// Output: true true
}

// Reading another node's status page as JSON, as a page that sums the
// cluster does; what is not a node's JSON gives the reason.
func ExampleReadPeer() {
	l, err := gopherpace.New(gopherpace.WithRate(100, time.Second))
	if err != nil {
		panic(err)
	}
	defer l.Close()
	node := httptest.NewServer(status.NewPage("api", l))
	defer node.Close()
	client := &http.Client{}
	var view struct {
		Rate string `json:"rate"`
	}
	err = status.ReadPeer(context.Background(), client, node.URL+"?format=json", 1<<20, &view)
	fmt.Println(view.Rate != "", err)
	err = status.ReadPeer(context.Background(), client, node.URL, 1<<20, &view) // the HTML page
	fmt.Println(err)
	// Output:
	// true <nil>
	// not a node's JSON: invalid character '<' looking for beginning of value
}

// Two nodes' top keys, summed: node a's handler reads node b's with
// ?cluster=true. The denials are counted each; admits one in 64, chosen
// at random, so this prints the denials.
func ExampleTopKeys() {
	var handlers []http.Handler
	var b *httptest.Server
	for _, name := range []string{"a", "b"} {
		l, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(1), gopherpace.WithNodeName(name),
			gopherpace.WithTopKeys(true)) // true: keys as they are, not hashed
		if err != nil {
			panic(err)
		}
		defer l.Close()
		for range 3 {
			l.Take("client-1", 1) // one admitted, two denied
		}
		handlers = append(handlers, status.TopKeys(l, func() []string { return []string{b.URL} }))
	}
	b = httptest.NewServer(handlers[1]) // node b's /status/topkeys
	defer b.Close()
	w := httptest.NewRecorder()
	handlers[0].ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/status/topkeys?cluster=true", nil))
	var view status.TopKeysView
	if err := json.Unmarshal(w.Body.Bytes(), &view); err != nil {
		panic(err)
	}
	fmt.Printf("node %s, summed over %v: denied %+v\n", view.Node, view.Nodes, view.Denied)
	// Output:
	// node a, summed over [a b]: denied [{Key:client-1 Count:4 Error:0}]
}

// Reading every other node's JSON at once, as a page that sums the
// cluster does: a node that does not answer has its reason.
func ExampleReadNodes() {
	l, err := gopherpace.New(gopherpace.WithRate(100, time.Second), gopherpace.WithNodeName("b"))
	if err != nil {
		panic(err)
	}
	defer l.Close()
	node := httptest.NewServer(status.NewPage("api", l))
	defer node.Close()
	other := httptest.NewServer(http.NotFoundHandler()) // not a gopherpace page
	defer other.Close()
	urls := []string{node.URL + "?format=json", other.URL}
	views, errs := status.ReadNodes[status.NodeView](context.Background(), &http.Client{}, urls, 1<<20)
	fmt.Printf("%q %q\n", views[0].Node, errs[0])
	fmt.Printf("%q\n", errs[1])
	// Output:
	// "b" ""
	// "404 Not Found"
}
