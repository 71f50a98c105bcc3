package status_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
	"github.com/pedreviljoen/gopherpace/core/status"
)

// Readiness and the status page, next to the limited routes.
func Example() {
	limiter, err := gopherpace.New(gopherpace.WithRate(100, time.Second))
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	mux := http.NewServeMux()
	mux.Handle("/readyz", status.Health(limiter))
	mux.Handle("/status", status.NewPage("checkout service", limiter))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output: 200 ok: standalone
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
	// false 1 of 2 known nodes in sight; out of sight: b (silent for 1.029s)
}
