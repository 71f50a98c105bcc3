package status

import (
	"encoding/json"
	"net/http"
	"strconv"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// TopKeysView is what a TopKeys handler answers: the keys a limiter
// denied and admitted most over the last one to two minutes, on this node
// or, with ?cluster=true, summed over the nodes. A count is over the
// truth by at most its error; admits are sampled (gopherpace.WithTopKeys).
type TopKeysView struct {
	Node     string                `json:"node"`
	Denied   []gopherpace.KeyCount `json:"denied"`
	Admitted []gopherpace.KeyCount `json:"admitted"`
	// Nodes names the nodes summed, with ?cluster=true; Unreachable those
	// that did not answer, by URL, and why.
	Nodes       []string          `json:"nodes,omitempty"`
	Unreachable map[string]string `json:"unreachable,omitempty"`
	// Gossip says the lists are the cluster's as the nodes send them each
	// other (?cluster=true with no peers to read).
	Gossip bool `json:"gossip,omitempty"`
}

// MaxTopKeys is the most keys a TopKeys handler lists of each kind.
const MaxTopKeys = 100

// TopKeys serves l's top keys as a TopKeysView in JSON: ?n=N lists N of
// each kind (1 to MaxTopKeys; default TopShown), and ?cluster=true sums
// this node's lists with every other node's, read at the URLs peers
// returns (each node's TopKeys handler), each within PeerTimeout. With
// peers nil, ?cluster=true lists the cluster's top keys as the nodes send
// them each other over gossip (gopherpace.Limiter.ClusterTopKeys): no
// HTTP between them, but keys this node has not seen by their hash, and
// from each node its top gopherpace.TopKeysSent alone. With no
// WithTopKeys on l, the lists are empty.
//
// peers decides which addresses this handler reads: return only the
// cluster's own members (a transport's, whose gossip is authenticated),
// never addresses a caller can choose.
func TopKeys(l *gopherpace.Limiter, peers func() []string) http.Handler {
	client := &http.Client{Timeout: PeerTimeout}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		n := TopShown
		if s := r.URL.Query().Get("n"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 || v > MaxTopKeys {
				http.Error(w, "n must be a whole number from 1 to "+strconv.Itoa(MaxTopKeys), http.StatusBadRequest)
				return
			}
			n = v
		}
		view := TopKeysView{Node: l.NodeName()}
		view.Denied, view.Admitted = l.TopKeys(n)
		switch c := r.URL.Query().Get("cluster"); {
		case c != "true" && c != "1":
		case peers != nil:
			view = sumTopKeys(r, client, view, peers(), n)
		default:
			view.Denied, view.Admitted = l.ClusterTopKeys(n)
			view.Gossip = true
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(view)
	})
}

// sumTopKeys sums own with the lists of the nodes at peers.
func sumTopKeys(r *http.Request, client *http.Client, own TopKeysView, peers []string, n int) TopKeysView {
	urls := make([]string, len(peers))
	for i, u := range peers {
		urls[i] = u + "?n=" + strconv.Itoa(n)
	}
	views, errs := ReadNodes[TopKeysView](r.Context(), client, urls, 1<<20)
	all := TopKeysView{Node: own.Node, Nodes: []string{own.Node}}
	denied, admitted := [][]gopherpace.KeyCount{own.Denied}, [][]gopherpace.KeyCount{own.Admitted}
	for i, v := range views {
		why := errs[i]
		if why == "" && v.Node == own.Node {
			why = SameNodeError
		}
		if why != "" {
			if all.Unreachable == nil {
				all.Unreachable = map[string]string{}
			}
			all.Unreachable[peers[i]] = why
			continue
		}
		all.Nodes = append(all.Nodes, v.Node)
		denied, admitted = append(denied, v.Denied), append(admitted, v.Admitted)
	}
	all.Denied, all.Admitted = gopherpace.MergeTopKeys(n, denied...), gopherpace.MergeTopKeys(n, admitted...)
	return all
}
