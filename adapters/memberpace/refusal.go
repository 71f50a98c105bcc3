package memberpace

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// refusalLogEvery spaces the ERROR records of a join its seeds refuse.
const refusalLogEvery = 10 * time.Second

// refusal remembers whether the seeds that answered this node's last join
// attempts refused it: a gossip key or label that does not match the
// cluster's. Such a node must not pass for the first node of a new cluster
// and serve the whole limit alone: while it is refused and alone,
// JoinError says why, so that its readiness fails (status.Ready, gopherpace
// serve's /readyz and gRPC health).
type refusal struct {
	mu      sync.Mutex
	err     error // the last round's refusal; nil when none answered, or one let it in
	lastLog time.Time
}

// settle records a join round: the seeds that answered and refused it
// (address → memberlist's reason) and whether any let it in.
func (r *refusal) settle(t *Transport, refusedBy map[string]string, joined bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if joined || len(refusedBy) == 0 {
		r.err = nil
		return
	}
	addrs := make([]string, 0, len(refusedBy))
	for a := range refusedBy {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	r.err = fmt.Errorf("memberpace: seeds %s answered but refused to let this node join (%s): its gossip key (WithSecretKeys, gopherpace serve's -secret-key) or label (WithLabel) does not match the cluster's",
		strings.Join(addrs, ", "), refusedBy[addrs[0]])
	if now := time.Now(); r.lastLog.IsZero() || now.Sub(r.lastLog) >= refusalLogEvery {
		r.lastLog = now
		t.log.Error("the cluster refuses this node: it stays unready until it joins", "node", t.name, "err", r.err)
	}
}

func (r *refusal) get() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// refusedJoin reports whether memberlist's error for a join says the seed
// answered and refused: everything but failing to resolve or to connect
// (no one listening, nothing routed), which a first node of a new cluster
// meets while its peers are not up yet.
func refusedJoin(err error) bool {
	msg := err.Error()
	for _, unreachable := range []string{"failed to resolve", "dial tcp", "connection refused", "i/o timeout", "no route to host", "network is unreachable"} {
		if strings.Contains(msg, unreachable) {
			return false
		}
	}
	return true
}

// JoinError is non-nil while this node is alone and the seeds it reached
// on its last attempt refused to let it join (gopherpace.JoinReporter): a
// gossip key or label that does not match the cluster's. It is nil when no
// seed answered (the first node of a new cluster), and from the moment
// this node has a peer.
func (t *Transport) JoinError() error {
	if t.ml.NumMembers() > 1 {
		return nil
	}
	return t.refused.get()
}
