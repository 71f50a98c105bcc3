package fiberpace

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp's process-wide goroutine that refreshes the Date header.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// fasthttp's worker-pool cleaner notices Stop only after its
		// 10-second sleep; it exits then.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	)
}

// The tests run on the real clock; limits of 1 token per second with small
// buckets keep refill out of the picture for the few milliseconds a test
// takes.

func limiter(t *testing.T, rate, burst int64, opts ...gopherpace.Option) *gopherpace.Limiter {
	t.Helper()
	l, err := gopherpace.New(append([]gopherpace.Option{gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(burst)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// serve runs a real Fiber app on a loopback listener.
func serve(t *testing.T, l *gopherpace.Limiter, appCfg fiber.Config, cfg ...Config) string {
	t.Helper()
	appCfg.DisableStartupMessage = true
	app := fiber.New(appCfg)
	h, err := New(l, cfg...)
	if err != nil {
		t.Fatal(err)
	}
	app.Use(h)
	app.Get("/", func(c *fiber.Ctx) error { return c.SendString("ok") })
	app.Get("/big", func(c *fiber.Ctx) error { return c.SendString("ok") })
	app.Get("/fail", func(c *fiber.Ctx) error { return c.Status(fiber.StatusBadGateway).SendString("upstream down") })
	app.Get("/error", func(c *fiber.Ctx) error { return fiber.NewError(fiber.StatusConflict, "conflict") })
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.SendString("ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Listener(ln) }()
	t.Cleanup(func() {
		if err := app.Shutdown(); err != nil {
			t.Error(err)
		}
		<-done
	})
	return "http://" + ln.Addr().String()
}

var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func get(t *testing.T, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestAllowedThenDenied(t *testing.T) {
	url := serve(t, limiter(t, 1, 2), fiber.Config{})
	r1 := get(t, url, nil)
	if r1.StatusCode != 200 || r1.Header.Get("RateLimit-Policy") != `"default";q=2;w=2` || r1.Header.Get("RateLimit") != `"default";r=1;t=1` {
		t.Fatalf("first: %d %v", r1.StatusCode, r1.Header)
	}
	get(t, url, nil)
	r3 := get(t, url, nil)
	if r3.StatusCode != 429 || r3.Header.Get("Retry-After") != "1" || r3.Header.Get("RateLimit") != `"default";r=0;t=1` {
		t.Fatalf("third: %d %v", r3.StatusCode, r3.Header)
	}
}

func TestKeysIgnoreSpoofedHeadersUnlessTheProxyIsTrusted(t *testing.T) {
	url := serve(t, limiter(t, 1, 1), fiber.Config{})
	a := get(t, url, map[string]string{"X-Forwarded-For": "198.51.100.1"})
	b := get(t, url, map[string]string{"X-Forwarded-For": "198.51.100.2"})
	if a.StatusCode != 200 || b.StatusCode != 429 {
		t.Fatalf("codes %d %d: a spoofed header bought a fresh bucket", a.StatusCode, b.StatusCode)
	}
	trusted := fiber.Config{ProxyHeader: fiber.HeaderXForwardedFor, EnableTrustedProxyCheck: true, TrustedProxies: []string{"127.0.0.1"}}
	url2 := serve(t, limiter(t, 1, 1), trusted)
	c := get(t, url2, map[string]string{"X-Forwarded-For": "198.51.100.1"})
	d := get(t, url2, map[string]string{"X-Forwarded-For": "198.51.100.2"})
	if c.StatusCode != 200 || d.StatusCode != 200 {
		t.Fatalf("codes %d %d: clients behind a trusted proxy share a bucket", c.StatusCode, d.StatusCode)
	}
}

func TestSkipFailedRequestsRefunds(t *testing.T) {
	l := limiter(t, 1, 2)
	url := serve(t, l, fiber.Config{}, Config{SkipFailedRequests: true, KeyGenerator: func(*fiber.Ctx) string { return "" }})
	// Failures by status and by returned error cost nothing...
	for range 5 {
		if r := get(t, url+"/fail", nil); r.StatusCode != 502 {
			t.Fatalf("/fail: %d", r.StatusCode)
		}
		if r := get(t, url+"/error", nil); r.StatusCode != 409 {
			t.Fatalf("/error: %d", r.StatusCode)
		}
	}
	// ...so the whole bucket is still there for successes.
	codes := []int{get(t, url, nil).StatusCode, get(t, url, nil).StatusCode, get(t, url, nil).StatusCode}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Fatalf("after failures: %v, want 200 200 429", codes)
	}
}

func TestSkipSuccessfulRequestsRefunds(t *testing.T) {
	url := serve(t, limiter(t, 1, 1), fiber.Config{}, Config{SkipSuccessfulRequests: true})
	for range 5 {
		if r := get(t, url, nil); r.StatusCode != 200 {
			t.Fatalf("successes should not count: %d", r.StatusCode)
		}
	}
	get(t, url+"/fail", nil)
	if r := get(t, url+"/fail", nil); r.StatusCode != 429 {
		t.Fatalf("second failure: %d, want 429", r.StatusCode)
	}
}

func TestNextCostLimitReachedAndErrors(t *testing.T) {
	reached := 0
	url := serve(t, limiter(t, 1, 5), fiber.Config{}, Config{
		Next: func(c *fiber.Ctx) bool { return c.Path() == "/healthz" },
		Cost: func(c *fiber.Ctx) int64 {
			switch c.Path() {
			case "/big":
				return 4
			case "/error":
				return 99
			}
			return 1
		},
		LimitReached: func(c *fiber.Ctx) error { reached++; return c.SendStatus(fiber.StatusServiceUnavailable) },
		Headers:      headers.Legacy,
	})
	if r := get(t, url+"/big", nil); r.StatusCode != 200 || r.Header.Get("X-RateLimit-Remaining") != "1" {
		t.Fatalf("cost 4: %d %v", r.StatusCode, r.Header)
	}
	if r := get(t, url+"/big", nil); r.StatusCode != 503 || reached != 1 {
		t.Fatalf("limit reached: %d (%d)", r.StatusCode, reached)
	}
	if r := get(t, url+"/healthz", nil); r.StatusCode != 200 || r.Header.Get("X-RateLimit-Limit") != "" {
		t.Fatalf("skipped: %d", r.StatusCode)
	}
	if r := get(t, url+"/error", nil); r.StatusCode != 500 {
		t.Fatalf("cost above the bucket: %d, want 500", r.StatusCode)
	}
}

func TestInvalidConfig(t *testing.T) {
	l := limiter(t, 1, 1)
	for name, cfg := range map[string][]Config{
		"two configs": {{}, {}},
		"style":       {{Headers: 9}},
		"policy":      {{PolicyName: "a\nb"}},
		"both skips":  {{SkipFailedRequests: true, SkipSuccessfulRequests: true}},
	} {
		if _, err := New(l, cfg...); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("nil limiter: no error")
	}
}

func TestClusteredLimiter(t *testing.T) {
	net := memtransport.New(memtransport.WithRealTime())
	ta, _ := net.Join("a")
	tb, _ := net.Join("b")
	la := limiter(t, 1, 2, gopherpace.WithTransport(ta))
	lb := limiter(t, 1, 2, gopherpace.WithTransport(tb))
	global := Config{KeyGenerator: func(*fiber.Ctx) string { return "" }}
	urlA := serve(t, la, fiber.Config{}, global)
	urlB := serve(t, lb, fiber.Config{}, global)
	deadline := time.Now().Add(5 * time.Second)
	for la.Stats().HeardNodes < 2 || lb.Stats().HeardNodes < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the nodes never heard each other")
		}
		time.Sleep(time.Millisecond)
	}
	for range 2 {
		if r := get(t, urlA, nil); r.StatusCode != 200 {
			t.Fatalf("node a: %d", r.StatusCode)
		}
	}
	for lb.Stats().TokensCharged < 2 {
		if time.Now().After(deadline) {
			t.Fatal("node b was never charged node a's tokens")
		}
		time.Sleep(time.Millisecond)
	}
	if r := get(t, urlB, nil); r.StatusCode != 429 {
		t.Fatalf("node b admitted after the bucket was spent on a: %d", r.StatusCode)
	}
}
