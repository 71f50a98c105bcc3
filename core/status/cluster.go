package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"slices"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// A NodeView is one node's view of its limiter, as its Page serves it
// with ?format=json, for a ClusterPage to show beside the others'.
type NodeView struct {
	Node         string     `json:"node"`
	Rate         string     `json:"rate"`
	Whole        bool       `json:"whole"`
	Verdict      string     `json:"verdict"`
	KnownNodes   int64      `json:"known_nodes"`
	VisibleNodes int64      `json:"visible_nodes"`
	Partitioned  bool       `json:"partitioned"`
	Recently     string     `json:"recently"` // allowed and denied per second
	Peers        []PeerView `json:"peers"`
	Generated    string     `json:"generated"`
	// The keys this node denied and admitted most lately, when its
	// limiter keeps them (gopherpace.WithTopKeys).
	TopDenied    []gopherpace.KeyCount `json:"top_denied,omitempty"`
	TopAdmitted  []gopherpace.KeyCount `json:"top_admitted,omitempty"`
	Unreachable  string                `json:"unreachable,omitempty"` // why a ClusterPage could not read it
	FromThisNode bool                  `json:"this_node,omitempty"`
}

// A PeerView is one peer as a node sees it.
type PeerView struct {
	Name      string `json:"name"`
	State     string `json:"state"` // in sight, out of sight, leaving
	LastHeard string `json:"last_heard"`
}

func (v pageView) node() NodeView {
	n := NodeView{Node: v.Node, Rate: v.Rate, Whole: v.Whole, Verdict: v.Verdict, KnownNodes: v.Stats.KnownNodes,
		VisibleNodes: v.Stats.VisibleNodes, Partitioned: v.Stats.Partitioned, Recently: v.Rates, Generated: v.Generated,
		TopDenied: v.TopDenied, TopAdmitted: v.TopAdmitted}
	for _, p := range v.Peers {
		n.Peers = append(n.Peers, PeerView{Name: p.Name, State: p.State, LastHeard: p.LastHeard})
	}
	return n
}

// A ClusterPage shows every node's view of a limiter side by side: each
// node's members, which of them it sees, its verdict and its traffic, not
// only the node it is opened on. It reads the other nodes' Pages as JSON,
// at the URLs peers returns when the page is opened (each node's Page, on
// the address its transport gives for it), all at once, each within
// PeerTimeout; a node that does not answer shows why.
//
// peers decides which addresses this page reads: return only the
// cluster's own members (a transport's, whose gossip is authenticated),
// never addresses a caller can choose.
type ClusterPage struct {
	title string
	self  *Page
	peers func() []string
	http  *http.Client
}

// PeerTimeout bounds the read of one other node's view.
const PeerTimeout = time.Second

// NewClusterPage returns the cluster page of self's limiter; peers gives
// the URLs of the other nodes' Pages.
func NewClusterPage(title string, self *Page, peers func() []string) *ClusterPage {
	return &ClusterPage{title: title, self: self, peers: peers, http: &http.Client{Timeout: PeerTimeout}}
}

// ServeHTTP renders the cluster page; with ?format=json, the
// ClusterView as JSON.
func (c *ClusterPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := c.self.limiter.Stats()
	now := time.Now()
	c.self.record(s, now)
	c.self.mu.Lock()
	own := c.self.view(s, now).node()
	c.self.mu.Unlock()
	own.FromThisNode = true
	peers := c.peers()
	urls := make([]string, len(peers))
	for i, u := range peers {
		urls[i] = u + "?format=json"
	}
	views, errs := ReadNodes[NodeView](r.Context(), c.http, urls, 256<<10)
	for i := range views {
		switch {
		case errs[i] != "":
			views[i] = NodeView{Node: peers[i], Unreachable: errs[i]}
		case views[i].Node == own.Node:
			views[i] = NodeView{Node: peers[i], Unreachable: SameNodeError}
		}
	}
	slices.SortFunc(views, func(a, b NodeView) int {
		switch {
		case a.Node < b.Node:
			return -1
		case a.Node > b.Node:
			return 1
		}
		return 0
	})
	nodes := append([]NodeView{own}, views...)
	var denied, admitted [][]gopherpace.KeyCount
	for _, n := range nodes {
		denied, admitted = append(denied, n.TopDenied), append(admitted, n.TopAdmitted)
	}
	view := ClusterView{Nodes: nodes,
		TopDenied: gopherpace.MergeTopKeys(TopShown, denied...), TopAdmitted: gopherpace.MergeTopKeys(TopShown, admitted...)}
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(view)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	data := struct {
		Title   string
		Refresh int
		ClusterView
	}{c.title, int(RefreshEvery / time.Second), view}
	if err := clusterTemplate.Execute(w, data); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// A ClusterView is what a ClusterPage shows, and serves as JSON with
// ?format=json: every node's view, this node's first, and the keys
// denied and admitted most across the cluster (each node's TopShown
// summed; see gopherpace.MergeTopKeys).
type ClusterView struct {
	Nodes       []NodeView            `json:"nodes"`
	TopDenied   []gopherpace.KeyCount `json:"top_denied"`
	TopAdmitted []gopherpace.KeyCount `json:"top_admitted"`
}

// ReadPeer reads another node's JSON at url into v, within PeerTimeout and
// at most max bytes of it: what a page that sums the cluster's nodes reads
// from each. The error says why a node could not be read.
func ReadPeer(ctx context.Context, client *http.Client, url string, max int64, v any) error {
	ctx, cancel := context.WithTimeout(ctx, PeerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, max)).Decode(v); err != nil {
		return fmt.Errorf("not a node's JSON: %w", err)
	}
	return nil
}

var clusterTemplate = template.Must(template.Must(template.New("cluster").Parse(keysTemplate)).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<title>{{.Title}}: the cluster</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#1f2328}
table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:4px 8px;vertical-align:top;text-align:left}
.bad{color:#cf222e}.good{color:#1a7f37}small{color:#57606a}
</style></head><body>
<h1>{{.Title}}: every node's view</h1>
<table>
<tr><th></th>{{range .Nodes}}<th>{{.Node}}{{if .FromThisNode}} <small>(this node)</small>{{end}}</th>{{end}}</tr>
<tr><th>verdict</th>{{range .Nodes}}<td>{{if .Unreachable}}<span class="bad">unreachable: {{.Unreachable}}</span>{{else if .Whole}}<span class="good">{{.Verdict}}</span>{{else}}<span class="bad">{{.Verdict}}</span>{{end}}</td>{{end}}</tr>
<tr><th>rate</th>{{range .Nodes}}<td>{{.Rate}}</td>{{end}}</tr>
<tr><th>members seen</th>{{range .Nodes}}<td>{{if not .Unreachable}}{{.VisibleNodes}} of {{.KnownNodes}}{{if .Partitioned}} <span class="bad">(partitioned)</span>{{end}}{{end}}</td>{{end}}</tr>
<tr><th>peers</th>{{range .Nodes}}<td>{{range .Peers}}{{.Name}}: {{if eq .State "in sight"}}{{.State}}{{else}}<span class="bad">{{.State}}</span>{{end}}, {{.LastHeard}}<br>{{end}}</td>{{end}}</tr>
<tr><th>recently</th>{{range .Nodes}}<td>{{.Recently}}</td>{{end}}</tr>
<tr><th>as of</th>{{range .Nodes}}<td><small>{{.Generated}}</small></td>{{end}}</tr>
</table>
{{if or .TopDenied .TopAdmitted}}
<h2>Keys denied most across the cluster, last 1–2 minutes</h2>
{{template "keys" .TopDenied}}
<h2>Keys admitted most across the cluster (sampled)</h2>
{{template "keys" .TopAdmitted}}
<p><small>The sums of each node's own lists (its ten heaviest): a key just below every node's ten is missed.</small></p>
{{end}}
<p><small>Each node's column is that node's own view, read from its status page; the page reloads every {{.Refresh}} s.</small></p>
</body></html>
`))
