package gopherpace

// windowSize is how many recent sequence numbers per peer are remembered
// for de-duplication. Frames are resent for two ticks, so any window that
// covers a few ticks of a peer's frames is enough; 1024 allows for bursts of
// early flushes and split batches.
const windowSize = 1024

// peer is what a node knows about one other node.
type peer struct {
	incarnation uint64
	window      seqWindow
	// lastHeard is when a frame last arrived (ns, limiter epoch). A peer
	// first seen in the transport's member list counts as heard then, so
	// that a node that has just joined is not taken for a partition.
	lastHeard int64
	// heard reports whether any frame has arrived; until one does, the peer
	// gets firstContact rather than the isolation timeout, since a new
	// member may not yet know about this node (memberlist spreads news of
	// joins by gossip, over a few hundred milliseconds).
	heard bool
	// globalSum is the highest global total charged from this incarnation;
	// synced says whether there is one yet.
	globalSum uint64
	synced    bool
	// departed marks a graceful leave of this incarnation.
	departed bool
}

// seqWindow remembers which of the last windowSize sequence numbers of one
// sender incarnation have arrived.
type seqWindow struct {
	started  bool
	lo, hi   uint64 // lowest and highest numbers seen
	received uint64 // distinct numbers accepted
	bits     [windowSize / 64]uint64
}

// accept reports whether seq is new, and records it.
func (w *seqWindow) accept(seq uint64) bool {
	switch {
	case !w.started:
		w.started, w.lo, w.hi = true, seq, seq
	case seq > w.hi:
		// Slots reused by the numbers now entering the window are cleared.
		if seq-w.hi >= windowSize {
			w.bits = [windowSize / 64]uint64{}
		} else {
			for s := w.hi + 1; s < seq; s++ {
				w.clear(s)
			}
		}
		w.hi = seq
	case w.hi-seq >= windowSize || w.has(seq):
		return false // a duplicate, or too old to tell
	case seq < w.lo:
		w.lo = seq
	}
	w.set(seq)
	w.received++
	return true
}

// missing is how many numbers between the lowest and highest seen never
// arrived (so far).
func (w *seqWindow) missing() uint64 {
	if !w.started {
		return 0
	}
	return w.hi - w.lo + 1 - min(w.received, w.hi-w.lo+1)
}

func (w *seqWindow) has(s uint64) bool { return w.bits[(s%windowSize)/64]&(1<<(s%64)) != 0 }
func (w *seqWindow) set(s uint64)      { w.bits[(s%windowSize)/64] |= 1 << (s % 64) }
func (w *seqWindow) clear(s uint64)    { w.bits[(s%windowSize)/64] &^= 1 << (s % 64) }
