package conformance

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// InProcess serves requests through l behind the adapter under test, with
// its defaults, without a network: through a recorder or the framework's
// own test entry, so that every goroutine stays inside a synctest bubble
// (time in a bubble stands still while a real socket is open). serve
// returns the status of a GET of path.
type InProcess func(t *testing.T, l *gopherpace.Limiter) (serve func(path string) int)

// RefillsWithVirtualTime checks, in a synctest bubble whose clock is
// virtual, that a bucket refills exactly when its rate says: a bucket of 1
// at 2 a second admits again 500 ms after it emptied, not at 499 ms.
func RefillsWithVirtualTime(t *testing.T, server InProcess) {
	// A framework may start a process-wide goroutine on first use
	// (fasthttp's clock of the Date header): outside the bubble, which
	// would wait for it.
	server(t, Limiter(t, 1, 1))("/")
	synctest.Test(t, func(t *testing.T) {
		get := server(t, Limiter(t, 2, 1))
		codes := []int{get("/"), get("/")}
		time.Sleep(499 * time.Millisecond)
		codes = append(codes, get("/"))
		time.Sleep(time.Millisecond) // one token at 2/s after 500ms
		codes = append(codes, get("/"))
		if fmt.Sprint(codes) != "[200 429 429 200]" {
			t.Fatalf("codes %v, want [200 429 429 200]", codes)
		}
	})
}
