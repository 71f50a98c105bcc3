package ginpace

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gin-gonic/gin"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	goleak.VerifyTestMain(m)
}

func limiter(t *testing.T, rate, burst int64, opts ...gopherpace.Option) *gopherpace.Limiter {
	t.Helper()
	l, err := gopherpace.New(append([]gopherpace.Option{gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(burst)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// server runs a real gin engine with the middleware behind an httptest
// server. configure may set trusted proxies and more.
func server(t *testing.T, l *gopherpace.Limiter, configure func(*gin.Engine), opts ...Option) *httptest.Server {
	t.Helper()
	r := gin.New()
	if configure != nil {
		configure(r)
	}
	mw, err := New(l, opts...)
	if err != nil {
		t.Fatal(err)
	}
	r.Use(mw)
	handler := func(c *gin.Context) {
		if d, ok := FromContext(c); ok {
			c.Header("X-Test-Remaining", string(rune('0'+d.Remaining)))
		}
		c.String(http.StatusOK, "ok")
	}
	r.GET("/", handler)
	r.GET("/big", handler)
	r.GET("/healthz", handler)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

func TestAllowedThenDeniedWithHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // time stands still: no refill
		srv := server(t, limiter(t, 1, 2), nil, WithPolicyName("per-ip"))
		r1, _ := get(t, srv.URL, nil)
		if r1.StatusCode != 200 || r1.Header.Get("RateLimit-Policy") != `"per-ip";q=2;w=2` || r1.Header.Get("RateLimit") != `"per-ip";r=1;t=1` {
			t.Fatalf("first: %d %v", r1.StatusCode, r1.Header)
		}
		get(t, srv.URL, nil)
		r3, body := get(t, srv.URL, nil)
		if r3.StatusCode != 429 || r3.Header.Get("Retry-After") != "1" || r3.Header.Get("RateLimit") != `"per-ip";r=0;t=1` {
			t.Fatalf("third: %d %v", r3.StatusCode, r3.Header)
		}
		var msg struct {
			Error      string `json:"error"`
			RetryAfter int64  `json:"retry_after_seconds"`
		}
		if err := json.Unmarshal([]byte(body), &msg); err != nil || msg.Error != "rate limit exceeded" || msg.RetryAfter != 1 {
			t.Fatalf("body %q: %v", body, err)
		}
	})
}

func TestRetryAfterRoundsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 2 tokens/s, bucket 3, every request costs 3: after the first, the
		// next needs 1.5 s of refill, sent as Retry-After: 2.
		srv := server(t, limiter(t, 2, 3), nil, WithCost(func(*gin.Context) int64 { return 3 }))
		get(t, srv.URL, nil)
		r, _ := get(t, srv.URL, nil)
		if r.StatusCode != 429 || r.Header.Get("Retry-After") != "2" {
			t.Fatalf("%d Retry-After %q, want 429 and 2 (1.5 s rounded up)", r.StatusCode, r.Header.Get("Retry-After"))
		}
	})
}

func TestSpoofedForwardedForDoesNotChangeTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		untrusted := func(r *gin.Engine) { r.SetTrustedProxies(nil) }
		srv := server(t, limiter(t, 1, 1), untrusted)
		a, _ := get(t, srv.URL, map[string]string{"X-Forwarded-For": "198.51.100.1"})
		b, _ := get(t, srv.URL, map[string]string{"X-Forwarded-For": "198.51.100.2"})
		if a.StatusCode != 200 || b.StatusCode != 429 {
			t.Fatalf("codes %d %d: a spoofed X-Forwarded-For bought a fresh bucket", a.StatusCode, b.StatusCode)
		}
		// A trusted proxy's header does choose the bucket.
		trusted := func(r *gin.Engine) { r.SetTrustedProxies([]string{"127.0.0.1"}) }
		srv2 := server(t, limiter(t, 1, 1), trusted)
		c, _ := get(t, srv2.URL, map[string]string{"X-Forwarded-For": "198.51.100.1"})
		d, _ := get(t, srv2.URL, map[string]string{"X-Forwarded-For": "198.51.100.2"})
		if c.StatusCode != 200 || d.StatusCode != 200 {
			t.Fatalf("codes %d %d: clients behind a trusted proxy share a bucket", c.StatusCode, d.StatusCode)
		}
	})
}

func TestSkipCostContextAndHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		denied := 0
		srv := server(t, limiter(t, 1, 5), nil,
			WithSkip(func(c *gin.Context) bool { return c.Request.URL.Path == "/healthz" }),
			WithCost(func(c *gin.Context) int64 {
				if c.Request.URL.Path == "/big" {
					return 4
				}
				return 1
			}),
			WithHeaders(headers.Legacy),
			WithDecisionInContext(),
			WithDenyHandler(func(c *gin.Context, d gopherpace.Decision) {
				denied++
				c.AbortWithStatus(http.StatusServiceUnavailable)
			}),
		)
		r, _ := get(t, srv.URL+"/big", nil)
		if r.StatusCode != 200 || r.Header.Get("X-RateLimit-Remaining") != "1" || r.Header.Get("X-Test-Remaining") != "1" {
			t.Fatalf("cost 4 of 5: %d %v", r.StatusCode, r.Header)
		}
		if r, _ := get(t, srv.URL+"/big", nil); r.StatusCode != 503 || denied != 1 {
			t.Fatalf("custom deny: %d (denied %d)", r.StatusCode, denied)
		}
		h, _ := get(t, srv.URL+"/healthz", nil)
		if h.StatusCode != 200 || h.Header.Get("X-RateLimit-Limit") != "" {
			t.Fatalf("skipped: %d %v", h.StatusCode, h.Header)
		}
	})
}

func TestErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := server(t, limiter(t, 1, 1), nil, WithKeyFunc(func(*gin.Context) (string, error) { return "", errors.New("no key") }))
		if r, _ := get(t, srv.URL, nil); r.StatusCode != 500 {
			t.Fatalf("key error: %d", r.StatusCode)
		}
		srv2 := server(t, limiter(t, 1, 1), nil, WithCost(func(*gin.Context) int64 { return 2 }),
			WithErrorHandler(func(c *gin.Context, err error) {
				if !errors.Is(err, gopherpace.ErrCostExceedsLimit) {
					t.Errorf("error %v", err)
				}
				c.AbortWithStatus(http.StatusRequestEntityTooLarge)
			}))
		if r, _ := get(t, srv2.URL, nil); r.StatusCode != 413 {
			t.Fatalf("cost error: %d", r.StatusCode)
		}
	})
	l := limiter(t, 1, 1)
	for name, opts := range map[string][]Option{
		"nil key": {WithKeyFunc(nil)}, "nil cost": {WithCost(nil)}, "nil skip": {WithSkip(nil)},
		"nil deny": {WithDenyHandler(nil)}, "nil error": {WithErrorHandler(nil)}, "style": {WithHeaders(9)},
		"policy": {WithPolicyName("")}, "nil option": {nil},
	} {
		if _, err := New(l, opts...); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("nil limiter: no error")
	}
}

// A clustered limiter behind gin: what one node admits is charged on the
// other. The network runs in real time, as the requests do.
func TestClusteredLimiter(t *testing.T) {
	net := memtransport.New(memtransport.WithRealTime())
	ta, _ := net.Join("a")
	tb, _ := net.Join("b")
	la := limiter(t, 1, 2, gopherpace.WithTransport(ta))
	lb := limiter(t, 1, 2, gopherpace.WithTransport(tb))
	srvA := server(t, la, nil, WithKeyFunc(GlobalKey))
	srvB := server(t, lb, nil, WithKeyFunc(GlobalKey))
	deadline := time.Now().Add(5 * time.Second)
	// Until a node has heard a peer it spends only its share of the burst.
	for la.Stats().HeardNodes < 2 || lb.Stats().HeardNodes < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the nodes never heard each other")
		}
		time.Sleep(time.Millisecond)
	}
	for range 2 {
		if r, _ := get(t, srvA.URL, nil); r.StatusCode != 200 {
			t.Fatalf("node a: %d", r.StatusCode)
		}
	}
	for lb.Stats().TokensCharged < 2 {
		if time.Now().After(deadline) {
			t.Fatal("node b was never charged node a's tokens")
		}
		time.Sleep(time.Millisecond)
	}
	if r, _ := get(t, srvB.URL, nil); r.StatusCode != 429 {
		t.Fatalf("node b admitted after the cluster's bucket was spent on a: %d", r.StatusCode)
	}
}
