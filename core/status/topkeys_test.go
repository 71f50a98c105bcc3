package status_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/status"
)

// A node's top keys, and with ?cluster=true the sum of every node's that
// answers: one that leads back to this node, or does not answer, is
// named with the reason and left out of the sum.
func TestTopKeysOfTheCluster(t *testing.T) {
	var urls []string
	var handlers []http.Handler
	for i, name := range []string{"a", "b", "c"} {
		l, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(1), gopherpace.WithNodeName(name),
			gopherpace.WithTopKeys(true))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		// "heavy" is denied 3 times on every node, "light-<name>" i+1 times.
		for range 4 {
			l.Take("heavy", 1)
		}
		for range i + 2 {
			l.Take("light-"+name, 1)
		}
		h := status.TopKeys(l, func() []string { return urls })
		handlers = append(handlers, h)
		if i > 0 {
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			urls = append(urls, srv.URL)
		}
	}
	self := httptest.NewServer(handlers[0]) // an address that leads back to a
	t.Cleanup(self.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close()
	urls = append(urls, self.URL, gone)

	read := func(query string) (int, status.TopKeysView) {
		w := httptest.NewRecorder()
		handlers[0].ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/"+query, nil))
		var v status.TopKeysView
		if w.Code == http.StatusOK {
			if err := json.NewDecoder(w.Body).Decode(&v); err != nil {
				t.Fatal(err)
			}
		}
		return w.Code, v
	}
	if code, v := read(""); code != 200 || v.Node != "a" || len(v.Denied) != 2 || v.Denied[0] != (gopherpace.KeyCount{Key: "heavy", Count: 3}) || v.Nodes != nil {
		t.Fatalf("a alone: %d %+v", code, v)
	}
	code, v := read("?cluster=true&n=2")
	if code != 200 || len(v.Nodes) != 3 || len(v.Unreachable) != 2 || v.Unreachable[self.URL] != status.SameNodeError || v.Unreachable[gone] == "" {
		t.Fatalf("the cluster: %d %+v", code, v)
	}
	want := []gopherpace.KeyCount{{Key: "heavy", Count: 9}, {Key: "light-c", Count: 3}}
	if len(v.Denied) != 2 || v.Denied[0] != want[0] || v.Denied[1] != want[1] {
		t.Fatalf("the cluster's denied keys %+v, want %+v", v.Denied, want)
	}
	for _, bad := range []string{"?n=0", "?n=101", "?n=x"} {
		if code, _ := read(bad); code != http.StatusBadRequest {
			t.Errorf("%s: %d", bad, code)
		}
	}
}

// With no peers to read, ?cluster=true answers the cluster's top keys as
// the nodes send them each other.
func TestTopKeysOverGossip(t *testing.T) {
	network, lims := cluster(t, "a", "b")
	now := network.Now()
	for range 4 {
		lims[1].TakeAt(now, "only-on-b", 100)
	}
	own, _ := lims[1].TopKeysAt(now, 1)
	network.Advance(1500 * time.Millisecond) // b sends its top keys
	w := httptest.NewRecorder()
	status.TopKeys(lims[0], nil).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/?cluster=true", nil))
	var v status.TopKeysView
	if err := json.NewDecoder(w.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	if len(own) != 1 || !v.Gossip || len(v.Denied) != 1 || v.Denied[0].Count != own[0].Count || !strings.HasPrefix(v.Denied[0].Key, "#") {
		t.Fatalf("a's view of the cluster: %+v", v)
	}
}
