package status

import (
	"context"
	"net/http"
	"sync"
)

// ReadNodes reads every other node's JSON at urls, all at once, each
// within PeerTimeout and at most max bytes: what a page that shows or
// sums the cluster's nodes reads from each. It reads at most the first
// MaxClusterNodes urls. errs[i] says why urls[i] could not be read ("" if
// it was).
func ReadNodes[V any](ctx context.Context, client *http.Client, urls []string, max int64) (views []V, errs []string) {
	if len(urls) > MaxClusterNodes {
		urls = urls[:MaxClusterNodes]
	}
	views, errs = make([]V, len(urls)), make([]string, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			if err := ReadPeer(ctx, client, u, max, &views[i]); err != nil {
				errs[i] = err.Error()
			}
		})
	}
	wg.Wait()
	return views, errs
}

// MaxClusterNodes bounds the nodes one cluster-wide read reaches.
const MaxClusterNodes = 64

// SameNodeError is why a node's answer is not counted when it came from
// the node that asked: the address leads back here, so the nodes do not
// listen on one HTTP port.
const SameNodeError = "it answered as this node: do the replicas listen on one HTTP port?"
