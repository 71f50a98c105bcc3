// Command llmbudget serves a stand-in for an LLM API behind a budget of
// tokens per API key: 6,000 tokens a minute for each key. How many tokens
// an answer uses is known only once it is generated, so each request is
// let in while its key's budget is not spent (or in debt), and what the
// answer used is charged after it (httplimit.WithUsage), which may take
// the budget into debt that refill repays before the key is let in again.
// Two clients ask for answers as fast as they can for a few seconds; it
// prints what each was answered, refused, and used, against the budget.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/httplimit"
)

// perMinute is each key's budget of LLM tokens; the bucket holds a
// minute's worth.
const perMinute = 6_000

func main() {
	seconds := flag.Int("seconds", 3, "seconds each client asks")
	flag.Parse()
	if err := run(os.Stdout, time.Duration(*seconds)*time.Second); err != nil {
		log.Fatal(err)
	}
}

// usage is what one client got.
type usage struct {
	answered, refused int
	tokens            int64
}

func run(out io.Writer, span time.Duration) error {
	budget, err := gopherpace.New(gopherpace.WithRate(perMinute, time.Minute))
	if err != nil {
		return err
	}
	defer budget.Close()
	handler := httplimit.New(budget,
		httplimit.WithKeyFunc(httplimit.HeaderKey("X-API-Key")),
		// What the answer used, from the field the handler sets.
		httplimit.WithUsage(func(_ *http.Request, h http.Header) int64 {
			n, _ := strconv.ParseInt(h.Get("X-Tokens-Used"), 10, 64)
			return n
		}),
	)(http.HandlerFunc(answer))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	url := "http://" + ln.Addr().String() + "/v1/complete"
	keys := []string{"team-a", "team-b"}
	got := make([]usage, len(keys))
	done := make(chan int)
	for i, key := range keys {
		go func() {
			defer func() { done <- i }()
			got[i] = ask(url, key, span)
		}()
	}
	for range keys {
		<-done
	}
	fmt.Fprintf(out, "budget: %d tokens a minute per key; each client asked for %v\n", perMinute, span)
	for i, key := range keys {
		u := got[i]
		bound := perMinute + perMinute*span.Seconds()/60
		fmt.Fprintf(out, "%s: %d answered, %d refused, %d tokens used (the budget allows %.0f in %v, plus one answer's overshoot)\n",
			key, u.answered, u.refused, u.tokens, bound, span)
	}
	return nil
}

// answer stands in for a model: an answer of 200 to 1,200 tokens, whose
// count it reports in X-Tokens-Used.
func answer(w http.ResponseWriter, r *http.Request) {
	used := 200 + rand.IntN(1000)
	w.Header().Set("X-Tokens-Used", strconv.Itoa(used))
	fmt.Fprintf(w, "an answer of %d tokens\n", used)
}

// ask asks for answers as fast as it can for span, and counts them.
func ask(url, key string, span time.Duration) usage {
	var u usage
	client := &http.Client{Timeout: 5 * time.Second}
	for deadline := time.Now().Add(span); time.Now().Before(deadline); {
		req, _ := http.NewRequest(http.MethodPost, url, nil)
		req.Header.Set("X-API-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			u.refused++
			time.Sleep(10 * time.Millisecond) // a client backs off a little
			continue
		}
		n, _ := strconv.ParseInt(resp.Header.Get("X-Tokens-Used"), 10, 64)
		u.answered++
		u.tokens += n
	}
	return u
}
