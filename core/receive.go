package gopherpace

// The engine's receiving side: frames from peers, charged to the local
// replicas.

func (e *engine) receive(from string, b []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	e.stats.framesReceived.Add(1)
	e.stats.bytesReceived.Add(uint64(len(b)))
	f := &e.rx
	if err := decodeFrame(b, f); err != nil {
		e.stats.malformed.Add(1)
		return
	}
	if f.limiter != e.id {
		e.stats.otherLimiter.Add(1)
		return
	}
	now := e.now()
	p := e.peers[from]
	if p == nil {
		p = &peer{}
		e.peers[from] = p
	}
	switch {
	case f.incarnation < p.incarnation:
		e.stats.duplicate.Add(1) // a late frame from before a restart
		return
	case f.incarnation > p.incarnation:
		e.stats.lostPrevious.Add(p.window.missing())
		*p = peer{incarnation: f.incarnation}
	}
	if f.seq == 0 {
		if len(f.keys) > 0 {
			e.stats.malformed.Add(1) // keyed counts must be numbered
			return
		}
	} else if !p.window.accept(f.seq) {
		e.stats.duplicate.Add(1)
		return
	}
	wasVisible := p.heard && now-p.lastHeard <= e.isolation
	p.lastHeard, p.heard = now, true
	if f.leaving {
		p.departed = true
	}
	e.contact(now, f.incarnation)
	global := e.globalCharge(p, f, wasVisible)
	charged := uint64(global)
	for _, kc := range f.keys {
		charged += uint64(kc.tokens)
	}
	e.stats.tokensCharged.Add(charged)
	if global > 0 {
		e.global.debit(e.pols.def, now, global, e.maxDebt(e.pols.def))
	}
	for _, kc := range f.keys {
		pol := e.pols.forKey(kc.key)
		if !e.keys.debit(kc.key, pol, now, kc.tokens, e.maxDebt(pol)) {
			e.stats.keysDropped.Add(1)
		}
	}
}

// maxDebt is how far beyond empty a peer's charges may take a bucket of p:
// one bucket, or nothing for the reference design, which floors at zero.
func (e *engine) maxDebt(p *policy) int64 {
	if e.floor {
		return 0
	}
	return p.tolerance
}

// globalCharge works out how many of a peer's global admits this frame
// brings that were not charged yet. Normally that is the growth of the
// peer's running total, so a lost frame costs nothing but delay. Two cases
// take only the frame's own delta and start counting from its total:
//   - the first frame from a peer that is older than this node: what it
//     admitted before this node existed is already reflected in a
//     newcomer's empty buckets;
//   - the first frame after the peer was out of sight: while cut off, each
//     side refilled at its share of the rate, so charging the other side's
//     admits from that time would charge them twice and stall the bucket.
//
// The first frame from a peer of the same age or younger brings its whole
// total: it may have admitted before it knew of this node (memberlist
// spreads news of a join by gossip), and those admits are this bucket's too.
func (e *engine) globalCharge(p *peer, f *frame, wasVisible bool) int64 {
	defer func() { p.globalSum, p.synced = max(p.globalSum, f.globalSum), true }()
	switch {
	case !p.synced && f.incarnation+uint64(2*e.interval) >= e.inc:
		return int64(f.globalSum)
	case !p.synced, !wasVisible:
		return f.global
	case f.globalSum > p.globalSum:
		return int64(f.globalSum - p.globalSum)
	}
	return 0
}

// contact runs on every fresh frame. The first one ends the pre-contact
// share; a peer that has been up for a while tells this node that it joined
// a running cluster, whose buckets may be empty: its own replicas start
// empty too instead of bringing a fresh full bucket.
func (e *engine) contact(now int64, peerInc uint64) {
	if !e.contacted {
		e.contacted = true
		if e.mode.Load() == modePreContact {
			e.enter(modeNormal)
		}
	}
	if e.learned || e.floor {
		return
	}
	if peerInc+uint64(2*e.interval) < e.inc {
		e.learned = true
		e.log.Info("joined a running cluster: starting from empty buckets", "node", e.name)
		e.global.empty(e.pols.def, now)
		e.keys.each(func(h uint64, ent *clusterEntry) { empty(&ent.tat, e.pols.forKey(h), now) })
	}
}
