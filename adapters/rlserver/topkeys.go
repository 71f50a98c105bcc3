package rlserver

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/status"
)

// /status/topkeys answers "who is being limited?": the keys denied and
// admitted most over the last one to two minutes, of the HTTP API and of
// the RateLimitService's rules, on this replica or, with ?cluster=true,
// summed over every replica (each read at its own /status/topkeys).

// TopKeysView is what /status/topkeys answers.
type TopKeysView struct {
	Node string `json:"node"`
	// Allow is the HTTP API's keys; RLS the RateLimitService's, each as
	// its rule's id and, for a rule with a bucket per value, the
	// descriptor's entries: "domain.key_value{key=value}".
	Allow TopKeysLists `json:"allow"`
	RLS   TopKeysLists `json:"rls"`
	// Nodes names the replicas summed, with ?cluster=true; Unreachable
	// those that did not answer, and why.
	Nodes       []string          `json:"nodes,omitempty"`
	Unreachable map[string]string `json:"unreachable,omitempty"`
}

// TopKeysLists is one limit's keys denied and admitted most. A count is
// over the truth by at most its error; admits are sampled.
type TopKeysLists struct {
	Denied   []gopherpace.KeyCount `json:"denied"`
	Admitted []gopherpace.KeyCount `json:"admitted"`
}

const (
	defaultTopShown = 10
	maxTopShown     = 100
)

// topKeysHandler serves /status/topkeys[?n=N][&cluster=true]. peers gives
// the other replicas' /status URLs (peerPages), or is nil.
func topKeysHandler(l *gopherpace.Limiter, rls *rlsService, peers func() []string) http.Handler {
	client := &http.Client{Timeout: status.PeerTimeout}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		n := defaultTopShown
		if s := r.URL.Query().Get("n"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 || v > maxTopShown {
				writeError(w, http.StatusBadRequest, "n must be a whole number from 1 to "+strconv.Itoa(maxTopShown))
				return
			}
			n = v
		}
		view := ownTopKeys(l, rls, n)
		if c := r.URL.Query().Get("cluster"); c == "true" || c == "1" {
			view = clusterTopKeys(r.Context(), client, view, peers, n)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(view)
	})
}

// ownTopKeys is this replica's lists.
func ownTopKeys(l *gopherpace.Limiter, rls *rlsService, n int) TopKeysView {
	v := TopKeysView{Node: l.NodeName()}
	v.Allow.Denied, v.Allow.Admitted = l.TopKeys(n)
	if rls == nil {
		return v
	}
	var denied, admitted [][]gopherpace.KeyCount
	if set := rls.rules.Load(); set != nil {
		for _, rl := range set.limiters {
			d, a := rl.TopKeys(n)
			denied, admitted = append(denied, readable(d)), append(admitted, readable(a))
		}
	}
	v.RLS.Denied, v.RLS.Admitted = gopherpace.MergeTopKeys(n, denied...), gopherpace.MergeTopKeys(n, admitted...)
	return v
}

// clusterTopKeys sums own with every other replica's lists.
func clusterTopKeys(ctx context.Context, client *http.Client, own TopKeysView, peers func() []string, n int) TopKeysView {
	var pages []string
	if peers != nil {
		pages = peers()
	}
	urls := make([]string, len(pages))
	for i, u := range pages {
		urls[i] = u + "/topkeys?n=" + strconv.Itoa(n)
	}
	views, errs := status.ReadNodes[TopKeysView](ctx, client, urls, 1<<20)
	all := TopKeysView{Node: own.Node, Nodes: []string{own.Node}}
	lists := [4][][]gopherpace.KeyCount{{own.Allow.Denied}, {own.Allow.Admitted}, {own.RLS.Denied}, {own.RLS.Admitted}}
	for i, v := range views {
		switch {
		case errs[i] != "":
		case v.Node == own.Node:
			errs[i] = status.SameNodeError
		default:
			all.Nodes = append(all.Nodes, v.Node)
			for j, l := range [4][]gopherpace.KeyCount{v.Allow.Denied, v.Allow.Admitted, v.RLS.Denied, v.RLS.Admitted} {
				lists[j] = append(lists[j], l)
			}
			continue
		}
		if all.Unreachable == nil {
			all.Unreachable = map[string]string{}
		}
		all.Unreachable[pages[i]] = errs[i]
	}
	all.Allow.Denied, all.Allow.Admitted = gopherpace.MergeTopKeys(n, lists[0]...), gopherpace.MergeTopKeys(n, lists[1]...)
	all.RLS.Denied, all.RLS.Admitted = gopherpace.MergeTopKeys(n, lists[2]...), gopherpace.MergeTopKeys(n, lists[3]...)
	return all
}

// readable renders the RateLimitService's bucket keys (bucketKey) as
// their rule's id and entries; a hashed key stays as it is.
func readable(list []gopherpace.KeyCount) []gopherpace.KeyCount {
	for i := range list {
		list[i].Key = readableBucketKey(list[i].Key)
	}
	return list
}

// readableBucketKey turns "id\x00entries" into "id{k=v,k=v}"; a key cut
// short (the core keeps 128 bytes of it) ends in "…".
func readableBucketKey(key string) string {
	id, entries, perValue := strings.Cut(key, "\x00")
	if !perValue {
		return key
	}
	var b strings.Builder
	b.WriteString(id)
	b.WriteByte('{')
	rest := []byte(entries)
	for first := true; len(rest) > 0; first = false {
		if !first {
			b.WriteByte(',')
		}
		k, v, tail, ok := nextEntry(rest)
		b.WriteString(k)
		if !ok {
			b.WriteString("…}")
			return b.String()
		}
		b.WriteByte('=')
		b.WriteString(v)
		rest = tail
	}
	b.WriteByte('}')
	return b.String()
}

// nextEntry reads one entry appendEntry wrote; ok is false for an entry
// cut short, k holding what there was of it.
func nextEntry(b []byte) (k, v string, rest []byte, ok bool) {
	if len(b) < 1 {
		return "", "", nil, false
	}
	b = b[1:] // the shared-wildcard mark
	field := func() (string, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 {
			b = nil
			return "", false
		}
		b = b[w:]
		if uint64(len(b)) < n {
			s := string(b)
			b = nil
			return s, false
		}
		s := string(b[:n])
		b = b[n:]
		return s, true
	}
	k, ok = field()
	if !ok {
		return k, "", nil, false
	}
	if v, ok = field(); !ok {
		return k + "=" + v, "", nil, false
	}
	return k, v, b, true
}
