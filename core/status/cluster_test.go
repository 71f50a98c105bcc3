package status_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/status"
)

// The cluster page shows each node's own view side by side, read from its
// page; a node that does not answer shows why.
func TestClusterPage(t *testing.T) {
	net0, lims := cluster(t, "a", "b", "c")
	net0.Advance(2 * time.Second) // every node hears the others
	pages := []*status.Page{status.NewPage("api", lims[0]), status.NewPage("api", lims[1])}
	srv := httptest.NewServer(pages[1])
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close()

	// Node b's view as JSON, as the cluster page reads it.
	resp, err := http.Get(srv.URL + "?format=json")
	if err != nil {
		t.Fatal(err)
	}
	var v status.NodeView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v.Node != "b" || v.KnownNodes != 3 || len(v.Peers) != 2 || v.Rate == "" {
		t.Fatalf("b's view: %+v", v)
	}

	cp := status.NewClusterPage("api", pages[0], func() []string { return []string{srv.URL, gone} })
	code, body := get(t, cp)
	if code != http.StatusOK {
		t.Fatalf("cluster page: %d", code)
	}
	for _, want := range []string{"<th>a <small>(this node)</small></th>", "<th>b</th>", "unreachable", "3 of 3", v.Rate} {
		if !strings.Contains(body, want) {
			t.Errorf("the cluster page lacks %q", want)
		}
	}
	if strings.Index(body, "<th>a ") > strings.Index(body, "<th>b</th>") {
		t.Error("this node's column is not first")
	}
}
