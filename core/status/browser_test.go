package status_test

import (
	"context"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/status"
)

// browser finds a headless-capable Chromium; make test installs one from
// the OS packages when it can.
func browser(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Skip("no Chromium on this machine, and make test could not install one (apt-get install chromium): the status page is not checked in a browser")
	return ""
}

// render loads url in headless Chromium and returns the DOM it built.
func render(t *testing.T, chromium, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-dev-shm-usage", "--no-first-run", "--user-data-dir="+t.TempDir(), "--dump-dom", url).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return string(out)
}

// In a real browser the page renders, names every member, and its numbers
// change between two loads under traffic.
func TestPageInABrowser(t *testing.T) {
	chromium := browser(t)
	net, lims := cluster(t, "node-a", "node-b", "node-c")
	srv := httptest.NewServer(status.NewPage("checkout-api", lims[0]))
	defer srv.Close()
	first := render(t, chromium, srv.URL)
	for i := range 60 {
		lims[0].AllowAt(net.Now())
		if i%10 == 9 {
			net.Advance(10 * time.Millisecond)
		}
	}
	second := render(t, chromium, srv.URL)
	for _, want := range []string{"checkout-api", "node-a", "node-b", "node-c", "whole"} {
		if !strings.Contains(second, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
	allowed := regexp.MustCompile(`id="allowed">(\d+)<`)
	a1, a2 := allowed.FindStringSubmatch(first), allowed.FindStringSubmatch(second)
	if a1 == nil || a2 == nil || a1[1] == a2[1] {
		t.Fatalf("allowed %v, then %v: the numbers did not change under traffic", a1, a2)
	}
}
