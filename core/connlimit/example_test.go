package connlimit_test

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/pedreviljoen/gopherpace/core/connlimit"
)

// A net/http server whose port no client can hold: at most 1,024
// connections, 256 from one address, the longest idle giving way to new
// ones.
func ExampleWrap() {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ln, err := connlimit.Wrap(tcp, connlimit.Limits{Total: 1024, PerClient: 256}, "http", nil)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }),
		ConnState: ln.ConnState, // tells the listener which connections are idle
		// Timeouts bound what one connection can hold; the caps bound how
		// many connections there are.
		ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute,
	}
	go srv.Serve(ln)
	defer srv.Close()

	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Print(string(body))
	fmt.Println(ln.Stats().Accepted, "accepted")
	// Output:
	// ok
	// 1 accepted
}
