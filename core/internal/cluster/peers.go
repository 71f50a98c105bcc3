package cluster

import "github.com/pedreviljoen/gopherpace/core/internal/wire"

// windowSize is how many recent sequence numbers per stream are remembered
// for de-duplication. Frames are resent for two ticks, so any window that
// covers a few ticks of a peer's frames is enough; 1024 allows for bursts of
// early flushes and split batches.
const windowSize = 1024

// maxStreams bounds the incarnations remembered per peer name. A restart
// opens a new stream beside the old one, whose late frames still find
// theirs; so does a frame that only claims the name, which therefore can
// never silence the real sender's stream.
const maxStreams = 4

// The peer view's records (membership.go): what this node knows of each
// other member and of each of its incarnations. Under the engine's lock.

// peer is what a node knows about one other member, by name.
type peer struct {
	name    string
	streams []*stream
	// incs holds the streams' incarnations in order, inside the record, so
	// that finding a frame's stream reads no stream: a pointer chase for
	// each was a sixth of a 300-node simulation.
	incs [maxStreams]uint64
	// lastHeard is when a frame last arrived from any stream (ns, limiter
	// epoch). A peer first seen in the transport's member list counts as
	// heard then, so that a node that has just joined is not taken for a
	// partition.
	lastHeard int64
	// heard reports whether any frame has arrived; until one does, the peer
	// gets firstContact rather than the isolation timeout, since a new
	// member may not yet know about this node (memberlist spreads news of
	// joins by gossip, over a few hundred milliseconds).
	heard bool
	// departed reports that the latest frame said goodbye.
	departed bool
	// idle reports that the latest frame said the peer is idle: it sends
	// nothing more until it admits or refuses again, and counts as heard
	// for as long as the transport lists it (peerView.evaluate).
	idle bool
	// predicted is the global tokens withheld on this peer's behalf while
	// it was silent, to take off its real count if it was only slow.
	predicted float64
	// listing is the number of the latest read of the member list that
	// listed the peer (peerView.listing).
	listing uint64
	// relayed reports that the latest frame came through relays, not
	// from the peer itself: a peer of another group in a grouped cluster
	// (internal/datagram), heard datagram.RelaySlack later than one of this node's own.
	relayed bool
	// owed reports that the slack a relayed peer's silence was given has
	// been withheld, once it turned out to be silence (slowClock).
	owed bool
}

// stream is the frames of one incarnation of a peer.
type stream struct {
	incarnation uint64
	window      seqWindow
	charge      chargeMark // what the receiver has charged of it (receiver.go)
	lastHeard   int64
	withheld    float64 // the share of the refill it withholds, last reported
	idle        bool    // the latest frame said idle: its load, level and withheld share are stale
	demandSeen  uint64  // the largest demand total a frame carried: more is news
	// lastGlobal and lastDemand are the running totals of the latest frame, which a
	// digest entry's truncated totals are widened from (the hub's receiveDigest).
	// The latest, not the largest: a frame that lied about them stops
	// mattering with the next true one.
	lastGlobal, lastDemand uint64
	fair                   peerShare // what fairness keeps of the sender (fairness.go)
}

// totals records the running totals of a frame of the stream, and
// reports whether its demand total is news: more than any frame carried.
func (s *stream) totals(global, demand uint64) (news bool) {
	s.lastGlobal, s.lastDemand = global, demand
	news = demand > s.demandSeen
	s.demandSeen = max(s.demandSeen, demand)
	return news
}

// stream returns p's stream for incarnation inc, opening one (in place of
// the least recently heard, when p has maxStreams) if there is none. It
// returns the count of frames the replaced stream never received.
func (p *peer) stream(inc uint64) (s *stream, lost uint64) {
	for i, x := range p.incs[:len(p.streams)] {
		if x == inc {
			return p.streams[i], 0
		}
	}
	s = &stream{incarnation: inc}
	if len(p.streams) < maxStreams {
		p.incs[len(p.streams)] = inc
		p.streams = append(p.streams, s)
		return s, 0
	}
	oldest := 0
	for i, x := range p.streams {
		if x.lastHeard < p.streams[oldest].lastHeard {
			oldest = i
		}
	}
	lost = p.streams[oldest].window.missing()
	p.streams[oldest], p.incs[oldest] = s, inc
	return s, lost
}

// tagged is p's freshest stream whose incarnation's tag is tag
// (wire.IncarnationTag), or nil.
func (p *peer) tagged(tag uint16) *stream {
	var found *stream
	for _, s := range p.streams {
		if wire.IncarnationTag(s.incarnation) == tag && (found == nil || s.lastHeard > found.lastHeard) {
			found = s
		}
	}
	return found
}

// vouchFor counts an idle p as heard at now (peerView.vouching).
func (p *peer) vouchFor(now int64) {
	if !p.idle || !p.heard {
		return
	}
	p.lastHeard = now
	if s := p.freshest(); s != nil {
		s.lastHeard = now
	}
}

// freshest is p's most recently heard stream, or nil.
func (p *peer) freshest() *stream {
	var f *stream
	for _, s := range p.streams {
		if f == nil || s.lastHeard > f.lastHeard {
			f = s
		}
	}
	return f
}

// missing is how many numbered frames p's streams are still missing.
func (p *peer) missing() uint64 {
	var n uint64
	for _, s := range p.streams {
		n += s.window.missing()
	}
	return n
}

// seqWindow remembers which of the last windowSize sequence numbers of one
// stream have arrived.
type seqWindow struct {
	started  bool
	lo, hi   uint64 // lowest and highest numbers seen
	received uint64 // distinct numbers accepted
	bits     [windowSize / 64]uint64
}

// accept reports whether seq is new, and records it. A number further
// behind the highest than the window reaches cannot be a late copy of a
// frame still remembered: either the highest came from a sender lying
// about the stream, or the frame is very late. Either way the window
// restarts at it, so that a lie cannot shut the true sender out; a very
// late frame may then be charged twice, which can only admit less.
func (w *seqWindow) accept(seq uint64) bool {
	switch {
	case !w.started || seq < w.hi && w.hi-seq >= windowSize:
		*w = seqWindow{started: true, lo: seq, hi: seq}
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
	case w.has(seq):
		return false // a duplicate
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
