package status_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
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

// In a storm the cluster page answers "who?" for the whole cluster: the
// keys each node denied most, summed across nodes, the key's bytes
// escaped.
func TestClusterPageListsTheKeysDeniedMost(t *testing.T) {
	net0, lims := cluster(t, "a", "b", "c")
	net0.Advance(2 * time.Second)
	hostile := `<img src=x onerror=alert(1)>`
	for i, l := range lims[:2] {
		for range 300 {
			l.Take("tenant-x", 1)
		}
		if i == 1 {
			for range 200 {
				l.Take(hostile, 1)
			}
		}
	}
	pages := []*status.Page{status.NewPage("api", lims[0]), status.NewPage("api", lims[1])}
	srv := httptest.NewServer(pages[1])
	defer srv.Close()

	_, own := get(t, pages[0])
	if !strings.Contains(own, "Keys denied most, this node") || !strings.Contains(own, "<code>tenant-x</code>") {
		t.Fatalf("node a's page does not list tenant-x:\n%s", own)
	}
	cp := status.NewClusterPage("api", pages[0], func() []string { return []string{srv.URL} })
	_, body := get(t, cp)
	if strings.Contains(body, hostile) || !strings.Contains(body, "&lt;img src=x") {
		t.Fatal("a key's bytes reach the cluster page unescaped")
	}
	// tenant-x's row must sum both nodes' denials: more than either node
	// could deny alone (300 requests each).
	m := regexp.MustCompile(`<code>tenant-x</code></td><td class="num">(\d+)</td>`).FindStringSubmatch(body[strings.Index(body, "across the cluster"):])
	if m == nil {
		t.Fatalf("the cluster page does not list tenant-x across the cluster:\n%s", body)
	}
	if n, _ := strconv.Atoi(m[1]); n <= 300 {
		t.Fatalf("tenant-x denied %d across the cluster, want the sum of two nodes' denials (over 300)", n)
	}

	// The same as JSON, for scripts and dashboards.
	w := httptest.NewRecorder()
	cp.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/?format=json", nil))
	var v status.ClusterView
	if err := json.NewDecoder(w.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	if len(v.Nodes) != 2 || !v.Nodes[0].FromThisNode || v.Nodes[1].Node != "b" || len(v.TopDenied) == 0 {
		t.Fatalf("the cluster as JSON: %+v", v)
	}
	if k := v.TopDenied[0]; k.Key != "tenant-x" || strconv.Itoa(int(k.Count)) != m[1] {
		t.Fatalf("the JSON's most denied: %+v, want tenant-x with %s as on the page", k, m[1])
	}
}
