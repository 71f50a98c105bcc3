package status_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
	"github.com/pedreviljoen/gopherpace/core/status"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// cluster starts n limiters on a simulated network named as given.
func cluster(t *testing.T, names ...string) (*memtransport.Network, []*gopherpace.Limiter) {
	t.Helper()
	net := memtransport.New(memtransport.WithRandom(8))
	var lims []*gopherpace.Limiter
	for _, name := range names {
		tr, err := net.Join(name)
		if err != nil {
			t.Fatal(err)
		}
		l, err := gopherpace.New(gopherpace.WithRate(100, time.Second), gopherpace.WithTransport(tr), gopherpace.WithLogger(quiet),
			gopherpace.WithTopKeys(true))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		lims = append(lims, l)
	}
	net.Advance(time.Second)
	return net, lims
}

func get(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	return w.Code, w.Body.String()
}

// Health is 200 while the cluster is whole, 503 naming the peer out of
// sight while one is cut off, and 200 again after the heal.
func TestHealthDuringAnIsolation(t *testing.T) {
	net, lims := cluster(t, "a", "b", "c")
	h := status.Health(lims[0])
	if code, body := get(t, h); code != 200 || !strings.Contains(body, "ok: 3 of 3 known nodes in sight") {
		t.Fatalf("whole: %d %q", code, body)
	}
	net.Isolate("c")
	net.Advance(time.Second)
	code, body := get(t, h)
	if code != 503 || !strings.Contains(body, "degraded: 2 of 3 known nodes in sight; out of sight: c (silent for") {
		t.Fatalf("isolated: %d %q", code, body)
	}
	net.Heal()
	net.Advance(time.Second)
	if code, body := get(t, h); code != 200 {
		t.Fatalf("healed: %d %q", code, body)
	}
	standalone, _ := gopherpace.New(gopherpace.WithRefillRate(1))
	defer standalone.Close()
	if code, body := get(t, status.Health(standalone)); code != 200 || body != "ok: standalone\n" {
		t.Fatalf("standalone: %d %q", code, body)
	}
}

// The page names every member, counts the decisions, fills its chart as
// it reloads, and escapes what peers call themselves.
func TestPage(t *testing.T) {
	net, lims := cluster(t, "node-a", "node-b", `<script>alert(1)</script>`)
	page := status.NewPage("checkout-api", lims[0])
	_, first := get(t, page)
	for i := range 150 {
		lims[0].AllowAt(net.Now())
		if i%10 == 9 {
			net.Advance(10 * time.Millisecond) // let the node report
		}
	}
	net.Advance(time.Second)
	code, second := get(t, page)
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	for _, want := range []string{"checkout-api", "node-a", "node-b", "&lt;script&gt;alert(1)&lt;/script&gt;", "3 of 3 in sight", `<svg`} {
		if !strings.Contains(second, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(second, "<script>") {
		t.Error("a peer's name reached the page unescaped")
	}
	allowed := regexp.MustCompile(`id="allowed">(\d+)<`)
	a1, a2 := allowed.FindStringSubmatch(first), allowed.FindStringSubmatch(second)
	if a1 == nil || a2 == nil || a1[1] != "0" || len(a2[1]) != 3 || a2[1] < "100" || a2[1] > "115" {
		t.Fatalf("allowed %v then %v, want 0 then the bucket (100) and a little refill", a1, a2)
	}
	if !strings.Contains(second, "denied per second") {
		t.Error("no rates after two loads")
	}
}

// The chart keeps a history whether or not anyone looks: the first look
// after a minute of traffic already has a minute of samples. The sampling
// stops once the limiter is closed (the bubble would not end otherwise).
func TestPageSamplesWithoutViewers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := gopherpace.New(gopherpace.WithRefillRate(100))
		if err != nil {
			t.Fatal(err)
		}
		page := status.NewPage("checkout-api", l)
		for range 60 {
			for range 50 {
				l.Allow()
			}
			time.Sleep(time.Second)
		}
		_, body := get(t, page)
		if bars := strings.Count(body, `fill="#2da44e"`); bars < 28 {
			t.Errorf("the first look after a minute drew %d bars, want a minute's worth (30 samples)", bars)
		}
		l.Close()
		time.Sleep(2 * status.RefreshEvery) // the sampler sees the limiter closed and stops
	})
}
