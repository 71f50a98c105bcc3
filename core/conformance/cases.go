package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// Every case spends a bucket that refills at one token a second within a
// few milliseconds, so refill never blurs what it checks.

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

var cases = []testCase{
	{"what a request used is charged after its handler, into debt, or given back", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 10), Setup{Key: KeyGlobal, UsageHeader: "X-Usage"})
		// Each admitted with 1 token; 6 used: 5 more charged.
		expect(t, get(t, url+"/", "X-Usage", "6"), 200) // 4 left
		expect(t, get(t, url+"/", "X-Usage", "6"), 200) // 2 in debt
		expect(t, get(t, url+"/", "X-Usage", "1"), 429)
		// Using nothing gives the token back: a bucket of 10 lets 15 in.
		url = server(t, limiter(t, 10), Setup{Key: KeyGlobal, UsageHeader: "X-Usage"})
		for range 15 {
			expect(t, get(t, url+"/", "X-Usage", "0"), 200)
		}
	}},
	{"with a delay allowed, a request waits for its tokens rather than be denied", func(t *testing.T, server Server) {
		// 20 a second: each token 50 ms after the last.
		l, err := gopherpace.New(gopherpace.WithRefillRate(20), gopherpace.WithBucketSize(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		url := server(t, l, Setup{MaxDelay: 5 * time.Second})
		start := time.Now()
		for range 4 {
			expect(t, get(t, url+"/"), 200)
		}
		// Three of the four waited for a token: 150 ms at least.
		if took := time.Since(start); took < 140*time.Millisecond {
			t.Fatalf("4 requests at 20 a second with a bucket of 1 took %v: they did not wait", took)
		}
		// A token due later than the delay allowed: denied.
		url = server(t, limiter(t, 1), Setup{MaxDelay: 10 * time.Millisecond})
		expect(t, get(t, url+"/"), 200)
		expect(t, get(t, url+"/"), 429)
	}},
	{"with a cap on requests in flight, one more is denied, and every request gives its slot back", func(t *testing.T, server Server) {
		f, err := gopherpace.NewInFlight(2)
		if err != nil {
			t.Fatal(err)
		}
		url := server(t, limiter(t, 100), Setup{InFlight: f})
		letGo := holdRequests(t.Name())
		defer letGo()
		statuses := make(chan int, 2)
		for range 2 {
			go func() {
				req, _ := http.NewRequest(http.MethodGet, url+"/", nil)
				req.Header.Set("X-Hold", t.Name())
				resp, err := client.Do(req)
				if err != nil {
					statuses <- 0
					return
				}
				resp.Body.Close()
				statuses <- resp.StatusCode
			}()
		}
		inFlight := func(want int64, what string) {
			t.Helper()
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				if own, _ := f.Count(""); own == want {
					return
				} else if time.Now().After(deadline) {
					t.Fatalf("%s: %d in flight, want %d", what, own, want)
				}
			}
		}
		inFlight(2, "two held requests")
		r := get(t, url+"/")
		expect(t, r, 429)
		header(t, r, "Retry-After", "1")
		// The draft fields list the in-flight limit after the rate, in
		// its own unit: none free.
		slotFields(t, r, `"inflight";q=2;qu="concurrent-requests"`, `"inflight";r=0`)
		letGo()
		for range 2 {
			if st := <-statuses; st != 200 {
				t.Fatalf("a held request ended %d", st)
			}
		}
		inFlight(0, "after the held requests")
		r = get(t, url+"/")
		expect(t, r, 200)
		slotFields(t, r, `"inflight";q=2;qu="concurrent-requests"`, `"inflight";r=1`) // its own is held
		expect(t, get(t, url+"/fail"), 500)
		inFlight(0, "after a failed request")
		// A request the rate denies takes no slot, and one refused a slot
		// spends no token: a bucket of 1 still lets the next request in.
		g, err := gopherpace.NewInFlight(1)
		if err != nil {
			t.Fatal(err)
		}
		url = server(t, limiter(t, 1), Setup{Key: KeyGlobal, InFlight: g})
		hold, _ := g.TryAcquire("")
		expect(t, get(t, url+"/"), 429) // no slot
		hold()
		expect(t, get(t, url+"/"), 200) // its token was given back
		expect(t, get(t, url+"/"), 429) // the rate's denial
		if own, _ := g.Count(""); own != 0 {
			t.Fatalf("%d in flight after a rate denial", own)
		}
		// Per key: a client's slot does not count against another's.
		h, err := gopherpace.NewInFlight(1)
		if err != nil {
			t.Fatal(err)
		}
		url = server(t, limiter(t, 100), Setup{Key: KeyHeader, KeyHeader: "X-Client", InFlight: h, InFlightPerKey: true})
		busy, _ := h.TryAcquire("a")
		expect(t, get(t, url+"/", "X-Client", "a"), 429)
		expect(t, get(t, url+"/", "X-Client", "b"), 200)
		busy()
		expect(t, get(t, url+"/", "X-Client", "a"), 200)
	}},
	{"the default key is the client's address, whatever it claims", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 2), Setup{})
		for i, want := range []int{200, 200, 429} {
			// Without trusted proxies a forwarded address is ignored.
			resp := get(t, url+"/", "X-Forwarded-For", fmt.Sprint("198.51.100.", i), "X-Real-IP", fmt.Sprint("198.51.100.", 10+i))
			expect(t, resp, want)
		}
	}},
	{"behind a trusted proxy the forwarded address is the key, walked from the right", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 1), Setup{TrustedProxies: loopback})
		// A client that prepends addresses only adds to the left.
		for i, want := range []int{200, 429, 429, 429} {
			expect(t, get(t, url+"/", "X-Forwarded-For", fmt.Sprintf("203.0.113.%d, 198.51.100.7", i)), want)
		}
		// A proxy that adds a field of its own instead of appending: the
		// last field's last address is still the client.
		expect(t, get(t, url+"/", "X-Forwarded-For", "203.0.113.50", "X-Forwarded-For", "198.51.100.7"), 429)
		expect(t, get(t, url+"/", "X-Forwarded-For", "198.51.100.7", "X-Forwarded-For", "203.0.113.51"), 200)
		expect(t, get(t, url+"/", "X-Forwarded-For", "198.51.100.8"), 200) // another client
		expect(t, get(t, url+"/", "X-Real-IP", "198.51.100.9"), 200)       // and another
	}},
	{"IPv6 clients are grouped by /64, or the prefix configured", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 1), Setup{TrustedProxies: loopback})
		expect(t, get(t, url+"/", "X-Forwarded-For", "2001:db8:1:2::1"), 200)
		expect(t, get(t, url+"/", "X-Forwarded-For", "2001:db8:1:2:aaaa::99"), 429) // same /64
		expect(t, get(t, url+"/", "X-Forwarded-For", "2001:db8:1:3::1"), 200)       // next /64
		url = server(t, limiter(t, 1), Setup{TrustedProxies: loopback, IPv6Prefix: 128})
		expect(t, get(t, url+"/", "X-Forwarded-For", "2001:db8:1:2::1"), 200)
		expect(t, get(t, url+"/", "X-Forwarded-For", "2001:db8:1:2::2"), 200)
	}},
	{"draft fields on every response; 429 with Retry-After on a denial", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 2), Setup{Policy: "per-client"})
		first := get(t, url+"/")
		expect(t, first, 200)
		header(t, first, "RateLimit-Policy", `"per-client";q=2;w=2`)
		header(t, first, "RateLimit", `"per-client";r=1;t=1`)
		header(t, first, "Retry-After", "")
		get(t, url+"/")
		denied := get(t, url+"/")
		expect(t, denied, 429)
		header(t, denied, "Retry-After", "1")
		header(t, denied, "RateLimit", `"per-client";r=0;t=1`)
		says(t, denied, adapter.DeniedMessage)
	}},
	{"no fields when asked for none, but Retry-After on a denial; legacy fields when asked for", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 1), Setup{Headers: headers.None})
		ok := get(t, url+"/")
		header(t, ok, "RateLimit", "")
		header(t, ok, "RateLimit-Policy", "")
		denied := get(t, url+"/")
		expect(t, denied, 429)
		header(t, denied, "Retry-After", "1")
		url = server(t, limiter(t, 3), Setup{Headers: headers.Legacy})
		legacy := get(t, url+"/")
		header(t, legacy, "X-RateLimit-Limit", "3")
		header(t, legacy, "X-RateLimit-Remaining", "2")
		header(t, legacy, "RateLimit", "")
	}},
	{"the deny handler answers with the Decision", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 1), Setup{Deny: Answering})
		get(t, url+"/")
		denied := get(t, url+"/")
		expect(t, denied, 429)
		header(t, denied, "X-Denied-Remaining", "0")
		header(t, denied, "Retry-After", "1") // set before the handler ran
		if denied.body != "denied" {
			t.Fatalf("body %q, want the deny handler's", denied.body)
		}
	}},
	{"a deny handler that does not stop the request stops it all the same", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 1), Setup{Deny: Careless})
		get(t, url+"/")
		denied := get(t, url+"/")
		expect(t, denied, 429)
		if strings.Contains(denied.body, "ok") {
			t.Fatalf("the route ran after the denial: body %q", denied.body)
		}
	}},
	{"a deny handler that answers nothing leaves the default denial", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 1), Setup{Deny: Silent})
		get(t, url+"/")
		denied := get(t, url+"/")
		expect(t, denied, 429)
		header(t, denied, "Retry-After", "1")
		if !strings.Contains(denied.body, adapter.DeniedMessage) {
			t.Fatalf("body %q, want the default denial's", denied.body)
		}
	}},
	{"the error handler answers, given the error, and nothing is spent", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 1), Setup{Key: KeyHeader, KeyHeader: "X-API-Key", CostHeader: "X-Cost", OnError: Answering})
		for _, c := range []struct {
			fields []string
			error  string
		}{
			{[]string{"X-API-Key", "a", "X-Cost", "2"}, "ErrCostExceedsLimit"},
			{[]string{"X-Cost", "1"}, "ErrMissingKey"},
		} {
			failed := get(t, url+"/", c.fields...)
			expect(t, failed, 503)
			header(t, failed, "X-Error", c.error)
			if failed.body != "failed" {
				t.Fatalf("body %q, want the error handler's", failed.body)
			}
		}
		expect(t, get(t, url+"/", "X-API-Key", "a"), 200)
		failing := get(t, server(t, limiter(t, 1), Setup{Key: KeyFailing, OnError: Answering})+"/")
		expect(t, failing, 503)
		header(t, failing, "X-Error", "ErrKeyFailing")
	}},
	{"an error handler that does not stop the request, or answers nothing, never lets it through", func(t *testing.T, server Server) {
		careless := get(t, server(t, limiter(t, 5), Setup{Key: KeyFailing, OnError: Careless})+"/")
		expect(t, careless, 503)
		if strings.Contains(careless.body, "ok") {
			t.Fatalf("the route ran after the error: body %q", careless.body)
		}
		silent := get(t, server(t, limiter(t, 5), Setup{Key: KeyFailing, OnError: Silent})+"/")
		expect(t, silent, 500)
		if !strings.Contains(silent.body, adapter.ServerErrorMessage) {
			t.Fatalf("body %q, want the default error's", silent.body)
		}
	}},
	{"handlers see the Decision when asked to", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 3), Setup{DecisionInContext: true})
		header(t, get(t, url+"/"), "X-Remaining", "2")
		header(t, get(t, url+"/"), "X-Remaining", "1")
	}},
	{"a global key puts every client in one bucket", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 2), Setup{Key: KeyGlobal, TrustedProxies: loopback})
		expect(t, get(t, url+"/", "X-Forwarded-For", "198.51.100.1"), 200)
		expect(t, get(t, url+"/", "X-Forwarded-For", "198.51.100.2"), 200)
		expect(t, get(t, url+"/", "X-Forwarded-For", "198.51.100.3"), 429)
	}},
	{"a header key: one bucket per value, and a missing key is 400", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 1), Setup{Key: KeyHeader, KeyHeader: "X-API-Key"})
		expect(t, get(t, url+"/", "X-API-Key", "tenant-a"), 200)
		expect(t, get(t, url+"/", "X-API-Key", "tenant-a"), 429)
		expect(t, get(t, url+"/", "X-API-Key", "tenant-b"), 200)
		missing := get(t, url+"/")
		expect(t, missing, 400)
		says(t, missing, adapter.MissingKey("the X-API-Key header").Error())
	}},
	{"a key function's own error is 500, says only where, and spends nothing", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 1), Setup{Key: KeyFailing})
		for range 2 {
			failed := get(t, url+"/")
			expect(t, failed, 500)
			says(t, failed, adapter.ServerErrorMessage)
			if strings.Contains(failed.body, "key store") {
				t.Fatalf("the client sees the error's details: %q", failed.body)
			}
		}
	}},
	{"a request may cost several tokens; a cost the bucket cannot grant is 400 and spends nothing", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 5), Setup{CostHeader: "X-Cost"})
		expect(t, get(t, url+"/", "X-Cost", "3"), 200)
		expect(t, get(t, url+"/", "X-Cost", "3"), 429)
		tooMuch := get(t, url+"/", "X-Cost", "6")
		expect(t, tooMuch, 400)
		says(t, tooMuch, gopherpace.ErrCostExceedsLimit.Error())
		none := get(t, url+"/", "X-Cost", "0")
		expect(t, none, 400)
		says(t, none, gopherpace.ErrInvalidCost.Error())
		expect(t, get(t, url+"/", "X-Cost", "2"), 200)
		expect(t, get(t, url+"/"), 429)
	}},
	{"skipped requests spend nothing and carry no fields", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 1), Setup{SkipPath: "/skip"})
		for range 3 {
			r := get(t, url+"/skip")
			expect(t, r, 200)
			header(t, r, "RateLimit", "")
		}
		expect(t, get(t, url+"/"), 200)
		expect(t, get(t, url+"/"), 429)
	}},
	{"responses from a status on give their tokens back", func(t *testing.T, server Server) {
		url := server(t, limiter(t, 2), Setup{RefundFrom: 500})
		for range 4 {
			expect(t, get(t, url+"/fail"), 500) // each refunded
		}
		expect(t, get(t, url+"/"), 200)
		expect(t, get(t, url+"/"), 200)
		expect(t, get(t, url+"/"), 429)
		// Without refunds a failure spends like any request.
		url = server(t, limiter(t, 1), Setup{})
		expect(t, get(t, url+"/fail"), 500)
		expect(t, get(t, url+"/"), 429)
	}},
	{"a further limit is passed together, all or nothing, and the fields list both", func(t *testing.T, server Server) {
		perKey := limiter(t, 3)
		url := server(t, limiter(t, 2), Setup{TrustedProxies: loopback, Policy: "per-client",
			Also: perKey, AlsoKeyHeader: "X-API-Key", AlsoPolicy: "per-key"})
		from := func(client, key string) response {
			return get(t, url+"/", "X-Forwarded-For", client, "X-API-Key", key)
		}
		first := from("198.51.100.1", "k")
		expect(t, first, 200)
		header(t, first, "RateLimit-Policy", `"per-client";q=2;w=2, "per-key";q=3;w=3`)
		header(t, first, "RateLimit", `"per-client";r=1;t=1, "per-key";r=2;t=1`)
		expect(t, from("198.51.100.1", "k"), 200)
		expect(t, from("198.51.100.1", "k"), 429) // the client's limit denies...
		expect(t, from("198.51.100.2", "k"), 200) // ...and the key's last token was kept
		denied := from("198.51.100.3", "k")       // now the key's limit denies...
		expect(t, denied, 429)
		header(t, denied, "Retry-After", "1")
		expect(t, from("198.51.100.3", "other"), 200) // ...and the client's tokens were kept
		expect(t, from("198.51.100.3", "other"), 200)
	}},
	{"clustered: a limit spent through one node is spent for the others", func(t *testing.T, server Server) {
		net := memtransport.New(memtransport.WithRealTime())
		var urls []string
		var lims []*gopherpace.Limiter
		for _, name := range []string{"a", "b"} {
			tr, err := net.Join(name)
			if err != nil {
				t.Fatal(err)
			}
			lims = append(lims, limiter(t, 4, gopherpace.WithTransport(tr)))
		}
		for _, l := range lims {
			urls = append(urls, server(t, l, Setup{Key: KeyGlobal}))
		}
		for deadline := time.Now().Add(5 * time.Second); lims[1].Stats().HeardNodes < 2; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the nodes never heard each other")
			}
		}
		for range 4 {
			expect(t, get(t, urls[0]+"/"), 200)
		}
		// Node b denies once a's report has arrived (a few milliseconds).
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if r := get(t, urls[1]+"/"); r.status == 429 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("node b still admits after node a spent the cluster's bucket")
			}
		}
	}},
}

type response struct {
	status int
	header http.Header
	body   string
}

var client = &http.Client{Timeout: 10 * time.Second}

// get requests url with the header fields given as name, value pairs; a
// name given twice sends two fields.
func get(t *testing.T, url string, fields ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		req.Header.Add(fields[i], fields[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, strings.TrimSpace(string(body))}
}

func expect(t *testing.T, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d (headers %v, body %q)", r.status, status, r.header, r.body)
	}
}

// says checks that a response's body carries message, in whatever
// envelope its framework wraps it.
func says(t *testing.T, r response, message string) {
	t.Helper()
	text := r.body
	var fields map[string]any // Gin's and Echo's JSON, which escapes '>'
	if json.Unmarshal([]byte(r.body), &fields) == nil {
		text = fmt.Sprint(fields)
	}
	if !strings.Contains(text, message) {
		t.Fatalf("body %q does not say %q (status %d)", r.body, message, r.status)
	}
}

// header checks a response field; want "" means absent.
// slotFields checks that the draft fields of r end with an in-flight
// limit's items.
func slotFields(t *testing.T, r response, policy, limit string) {
	t.Helper()
	p, l := r.header.Get("RateLimit-Policy"), r.header.Get("RateLimit")
	if !strings.HasSuffix(p, ", "+policy) || !strings.HasSuffix(l, ", "+limit) {
		t.Fatalf("RateLimit-Policy %q and RateLimit %q, want them to end with %s and %s", p, l, policy, limit)
	}
}

func header(t *testing.T, r response, name, want string) {
	t.Helper()
	if got := r.header.Get(name); got != want {
		t.Fatalf("%s: %q, want %q (status %d, headers %v)", name, got, want, r.status, r.header)
	}
}

// Cost parses a CostHeader value; adapters' cost functions use it. A
// missing or unparsable value costs 1; the limiter rejects a cost below 1.
func Cost(value string) int64 {
	if value == "" {
		return 1
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return 1
	}
	return n
}
