package cluster

import (
	"log/slog"
	"sync/atomic"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

// clusterEntry is a clustered store's keyed bucket: its word, and the counts
// the engine has not yet sent or not yet heard its peers take in.
type clusterEntry struct {
	tat      atomic.Int64
	pending  atomic.Int64 // admitted here, not yet sent
	inflight atomic.Int64 // sent within the last reportFlight (decide_clustered.go)
	// fair is the key's share while it is hot (key_shares.go); nil
	// otherwise.
	fair atomic.Pointer[keyShare]
}

func (e *clusterEntry) Word() *atomic.Int64 { return &e.tat }

// addPending counts n tokens admitted here for the next report, and
// returns the count now pending; takePending hands the count to a flush.
// addInflight counts n tokens reported and not yet surely heard (n < 0:
// heard). Lock-free: the request path and the sender call them.
func (e *clusterEntry) addPending(n int64) int64 { return e.pending.Add(n) }
func (e *clusterEntry) takePending() int64       { return e.pending.Swap(0) }
func (e *clusterEntry) addInflight(n int64)      { e.inflight.Add(n) }

// attachShare makes k the key's share while it is hot; dropShare
// detaches it, unless another has taken its place (key_shares.go).
func (e *clusterEntry) attachShare(k *keyShare) {
	if e.fair.Load() != k {
		e.fair.Store(k)
	}
}
func (e *clusterEntry) dropShare(k *keyShare) { e.fair.CompareAndSwap(k, nil) }

func (e *clusterEntry) Busy() bool { return e.pending.Load() != 0 || e.inflight.Load() != 0 }

// clusterSlot is a clustered table's slot value (bucket.SlotValue): a tombstone holds
// nil.
type clusterSlot struct{ p atomic.Pointer[clusterEntry] }

func (s *clusterSlot) Entry() *clusterEntry { return s.p.Load() }

func (s *clusterSlot) Fill(at bucket.Time) *clusterEntry {
	e := new(clusterEntry)
	e.tat.Store(int64(at))
	s.p.Store(e)
	return e
}

func (s *clusterSlot) MoveTo(dst *clusterSlot) bool {
	e := s.p.Load()
	dst.p.Store(e)
	return e != nil
}

func (s *clusterSlot) Vacate() { s.p.Store(nil) }

type Store = bucket.Store[clusterSlot, clusterEntry, *clusterSlot, *clusterEntry]

func NewStore(maxKeys int64, log *slog.Logger, ruleOf func(uint64) *bucket.Rule) *Store {
	return bucket.NewStore[clusterSlot, clusterEntry, *clusterSlot, *clusterEntry](maxKeys, log, ruleOf)
}
