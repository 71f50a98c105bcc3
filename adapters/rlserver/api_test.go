package rlserver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newServer(t *testing.T, opts ...gopherpace.Option) *httptest.Server {
	t.Helper()
	l, err := gopherpace.New(append([]gopherpace.Option{gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(10)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler(l, nil, nil, nil, nil))
	t.Cleanup(func() { srv.Close(); l.Close() })
	return srv
}

type reply struct {
	code   int
	header http.Header
	body   string
}

func call(t *testing.T, method, url string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(body)}
}

// The seed service's quick check, at -rate 10 -burst 10: twelve requests
// for one key are ten 200s, then 429s, with the seed's bodies and headers.
// The bucket refills a token every 100 ms, so a run that took longer than
// that (a starved machine) proves nothing and is made again, on a fresh key.
func TestSeedQuickCheck(t *testing.T) {
	srv := newServer(t)
	denied := regexp.MustCompile(`^\{"allowed":false,"remaining":0,"limit":10,"rate":10,"retry_after_ms":(\d+)\}\n$`)
	for attempt := 0; ; attempt++ {
		key := "t" + strconv.Itoa(attempt)
		start := time.Now()
		var replies []reply
		for range 12 {
			replies = append(replies, call(t, http.MethodGet, srv.URL+"/allow?key="+key))
		}
		if time.Since(start) >= 90*time.Millisecond {
			if attempt == 20 {
				t.Fatal("twelve requests never fitted in 90 ms")
			}
			continue
		}
		for i, r := range replies[:10] {
			want := `{"allowed":true,"remaining":` + strconv.Itoa(9-i) + `,"limit":10,"rate":10}` + "\n"
			if r.code != 200 || r.body != want || r.header.Get("X-RateLimit-Limit") != "10" || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(9-i) || r.header.Get("Retry-After") != "" {
				t.Fatalf("request %d: %d %q %v; want 200 %q", i+1, r.code, r.body, r.header, want)
			}
		}
		for i, r := range replies[10:] {
			m := denied.FindStringSubmatch(r.body)
			if r.code != 429 || m == nil || r.header.Get("Retry-After") != "1" || r.header.Get("X-RateLimit-Remaining") != "0" {
				t.Fatalf("request %d: %d %q %v; want 429 with the seed's body and Retry-After: 1", 11+i, r.code, r.body, r.header)
			}
			if ms, _ := strconv.Atoi(m[1]); ms < 1 || ms > 100 {
				t.Fatalf("retry_after_ms %d; a token comes every 100 ms", ms)
			}
		}
		break
	}
	s := call(t, http.MethodGet, srv.URL+"/stats")
	if s.code != 200 || !regexp.MustCompile(`^\{"keys":\d+,"allowed_total":\d+,"denied_total":[1-9]\d*\}\n$`).MatchString(s.body) {
		t.Fatalf("/stats: %d %q", s.code, s.body)
	}
	if h := call(t, http.MethodGet, srv.URL+"/healthz"); h.code != 200 || h.body != "ok\n" {
		t.Fatalf("/healthz: %d %q", h.code, h.body)
	}
}

// POST works as GET does; n spends several tokens; a per-key limit has
// its own rate and bucket.
func TestAllowCostsAndOverrides(t *testing.T) {
	srv := newServer(t, gopherpace.WithOverride("tenant-a", 100, 200))
	if r := call(t, http.MethodPost, srv.URL+"/allow?key=k&n=4"); r.code != 200 || r.body != `{"allowed":true,"remaining":6,"limit":10,"rate":10}`+"\n" {
		t.Fatalf("POST n=4: %d %q", r.code, r.body)
	}
	if r := call(t, http.MethodGet, srv.URL+"/allow?key=tenant-a&n=50"); r.code != 200 || r.body != `{"allowed":true,"remaining":150,"limit":200,"rate":100}`+"\n" {
		t.Fatalf("tenant-a: %d %q", r.code, r.body)
	}
}

// Bad input is a 400 (405 for another method) that spends nothing.
func TestBadInput(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct {
		method, query string
		code          int
		says          string
	}{
		{"GET", "", 400, "missing key"},
		{"GET", "key=", 400, "missing key"},
		{"GET", "key=k&n=0", 400, "n must be"},
		{"GET", "key=k&n=-3", 400, "n must be"},
		{"GET", "key=k&n=abc", 400, "n must be"},
		{"GET", "key=k&n=1.5", 400, "n must be"},
		{"GET", "key=k&n=99999999999999999999999", 400, "n must be"},
		{"GET", "key=k&n=11", 400, "bucket size"},
		{"GET", "key=" + strings.Repeat("x", maxKeyBytes+1), 400, "longer than"},
		{"PUT", "key=k", 405, "GET or POST"},
		{"DELETE", "key=k", 405, "GET or POST"},
	} {
		r := call(t, tc.method, srv.URL+"/allow?"+tc.query)
		if r.code != tc.code || !strings.Contains(r.body, tc.says) || !strings.HasPrefix(r.body, `{"error":`) {
			t.Errorf("%s ?%.40s: %d %q; want %d saying %q", tc.method, tc.query, r.code, r.body, tc.code, tc.says)
		}
	}
	if r := call(t, http.MethodGet, srv.URL+"/allow?key=k&n=10"); r.code != 200 {
		t.Fatalf("after the bad requests the bucket of k is not full: %d %q", r.code, r.body)
	}
}
