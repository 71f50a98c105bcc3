package echopace

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func limiter(t *testing.T, rate, burst int64, opts ...gopherpace.Option) *gopherpace.Limiter {
	t.Helper()
	l, err := gopherpace.New(append([]gopherpace.Option{gopherpace.WithRefillRate(rate), gopherpace.WithBucketSize(burst)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func server(t *testing.T, mw echo.MiddlewareFunc, configure func(*echo.Echo)) *httptest.Server {
	t.Helper()
	e := echo.New()
	if configure != nil {
		configure(e)
	}
	e.Use(mw)
	ok := func(c echo.Context) error { return c.String(http.StatusOK, "ok") }
	e.GET("/", ok)
	e.GET("/big", ok)
	e.GET("/healthz", ok)
	srv := httptest.NewServer(e)
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

func TestAllowedThenDeniedThroughTheAppErrorHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := server(t, RateLimiter(limiter(t, 1, 2)), func(e *echo.Echo) {
			e.HTTPErrorHandler = func(err error, c echo.Context) {
				var he *echo.HTTPError
				if errors.As(err, &he) {
					c.JSON(he.Code, map[string]any{"problem": he.Message})
				}
			}
		})
		r1, _ := get(t, srv.URL, nil)
		if r1.StatusCode != 200 || r1.Header.Get("RateLimit") != `"default";r=1;t=1` {
			t.Fatalf("first: %d %v", r1.StatusCode, r1.Header)
		}
		get(t, srv.URL, nil)
		r3, body := get(t, srv.URL, nil)
		if r3.StatusCode != 429 || r3.Header.Get("Retry-After") != "1" || !strings.Contains(body, `"problem":"rate limit exceeded"`) {
			t.Fatalf("third: %d %v %q", r3.StatusCode, r3.Header, body)
		}
	})
}

func TestRealIPKeyAndSpoofing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// No IPExtractor: RealIP is the connection's address, whatever the
		// client claims.
		srv := server(t, RateLimiter(limiter(t, 1, 1)), nil)
		a, _ := get(t, srv.URL, map[string]string{"X-Forwarded-For": "198.51.100.1", "X-Real-IP": "198.51.100.1"})
		b, _ := get(t, srv.URL, map[string]string{"X-Forwarded-For": "198.51.100.2", "X-Real-IP": "198.51.100.2"})
		if a.StatusCode != 200 || b.StatusCode != 429 {
			t.Fatalf("codes %d %d: a spoofed header bought a fresh bucket", a.StatusCode, b.StatusCode)
		}
		// With an extractor that trusts the loopback proxy, clients count apart.
		srv2 := server(t, RateLimiter(limiter(t, 1, 1)), func(e *echo.Echo) { e.IPExtractor = echo.ExtractIPFromXFFHeader() })
		c, _ := get(t, srv2.URL, map[string]string{"X-Forwarded-For": "198.51.100.1"})
		d, _ := get(t, srv2.URL, map[string]string{"X-Forwarded-For": "198.51.100.2"})
		if c.StatusCode != 200 || d.StatusCode != 200 {
			t.Fatalf("codes %d %d: clients behind a trusted proxy share a bucket", c.StatusCode, d.StatusCode)
		}
	})
}

func TestConfigHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before, denied := 0, ""
		srv := server(t, RateLimiterWithConfig(Config{
			Limiter:    limiter(t, 1, 5),
			Skipper:    func(c echo.Context) bool { return c.Path() == "/healthz" },
			BeforeFunc: func(echo.Context) { before++ },
			IdentifierExtractor: func(c echo.Context) (string, error) {
				if k := c.Request().Header.Get("X-API-Key"); k != "" {
					return k, nil
				}
				return "", errors.New("no key")
			},
			CostFunc: func(c echo.Context) int64 {
				if c.Path() == "/big" {
					return 4
				}
				return 1
			},
			DenyHandler: func(c echo.Context, id string, d gopherpace.Decision) error {
				denied = id
				return c.String(http.StatusServiceUnavailable, "later")
			},
			Headers: headers.Legacy,
		}), nil)
		key := map[string]string{"X-API-Key": "k1"}
		if r, _ := get(t, srv.URL+"/", nil); r.StatusCode != 403 {
			t.Fatalf("extractor error: %d", r.StatusCode)
		}
		r, _ := get(t, srv.URL+"/big", key)
		if r.StatusCode != 200 || r.Header.Get("X-RateLimit-Remaining") != "1" {
			t.Fatalf("cost 4: %d %v", r.StatusCode, r.Header)
		}
		if r, _ := get(t, srv.URL+"/big", key); r.StatusCode != 503 || denied != "k1" {
			t.Fatalf("deny: %d %q", r.StatusCode, denied)
		}
		if r, _ := get(t, srv.URL+"/healthz", key); r.StatusCode != 200 || r.Header.Get("X-RateLimit-Limit") != "" {
			t.Fatalf("skipped: %d", r.StatusCode)
		}
		if before != 3 {
			t.Fatalf("BeforeFunc ran %d times, want 3", before)
		}
	})
}

func TestInvalidConfig(t *testing.T) {
	if _, err := (Config{}).ToMiddleware(); err == nil {
		t.Error("missing limiter: no error")
	}
	l := limiter(t, 1, 1)
	if _, err := (Config{Limiter: l, Headers: 9}).ToMiddleware(); err == nil {
		t.Error("bad header style: no error")
	}
	if _, err := (Config{Limiter: l, PolicyName: "a\nb"}).ToMiddleware(); err == nil {
		t.Error("bad policy name: no error")
	}
	defer func() {
		if recover() == nil {
			t.Error("RateLimiter(nil) did not panic like Echo's RateLimiter(nil store)")
		}
	}()
	RateLimiter(nil)
}

func TestStoreDropsIntoEchosOwnMiddleware(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mw := middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{Store: NewStore(limiter(t, 1, 1))})
		srv := server(t, mw, nil)
		a, _ := get(t, srv.URL, nil)
		b, _ := get(t, srv.URL, nil)
		if a.StatusCode != 200 || b.StatusCode != 429 {
			t.Fatalf("codes %d %d", a.StatusCode, b.StatusCode)
		}
	})
}

func TestClusteredLimiter(t *testing.T) {
	net := memtransport.New(memtransport.WithRealTime())
	ta, _ := net.Join("a")
	tb, _ := net.Join("b")
	la := limiter(t, 1, 2, gopherpace.WithTransport(ta))
	lb := limiter(t, 1, 2, gopherpace.WithTransport(tb))
	global := func(echo.Context) (string, error) { return "", nil }
	srvA := server(t, RateLimiterWithConfig(Config{Limiter: la, IdentifierExtractor: global}), nil)
	srvB := server(t, RateLimiterWithConfig(Config{Limiter: lb, IdentifierExtractor: global}), nil)
	deadline := time.Now().Add(5 * time.Second)
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
		t.Fatalf("node b admitted after the bucket was spent on a: %d", r.StatusCode)
	}
}
