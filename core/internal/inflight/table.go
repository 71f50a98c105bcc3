// Package inflight is the arithmetic of an in-flight limit that a cluster
// shares: this node's requests in flight per key, what each peer last
// reported of its own (wire's gauge frames), and the part of the limit
// each node may fill, by demand. It knows no transport and reads no
// clock: every call takes now, in nanoseconds.
//
// The limit is dealt to the nodes in shares, in proportion to the
// requests each is asked for (every node that knows the same demands
// deals alike). A node lets a request in when the cluster, as it knows
// it, has a free slot (its own count and the peers' last reported counts
// are below the limit) and either
//
//   - it holds fewer than its share: no other node deals that slot to
//     itself, so these need no word from the peers; or
//   - the free slot is not kept for a peer (a peer that refuses requests
//     and holds fewer than its share has the difference kept for it, so
//     a busy node cannot take every slot a quieter one frees), and the
//     node has let in fewer than LocalCap requests its peers may not have
//     heard of yet (since its last report, or within ReportFlight of it);
//     at the cap the caller sends a report and tries again.
//
// Slots beyond the shares go only LocalCap at a time per node unheard, so
// the cluster holds at most Bound (docs/design.md, "In-flight limits").
package inflight

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// ReportFlight is how long a report counts as not yet heard by the peers:
// more than delivery takes on a LAN.
const ReportFlight = int64(2_000_000)

// demandTau is the time constant of the demand's smoothing (ns).
const demandTau = 500_000_000

// Verdict is what Acquire decided.
type Verdict uint8

const (
	// Admitted: the request holds a slot until Release.
	Admitted Verdict = iota
	// Full: the cluster's slots, or those free for this node, are taken.
	Full
	// Unheard: LocalCap requests of this node's are not heard yet; send a
	// report and try again after ReportFlight.
	Unheard
)

// A Table is one in-flight limiter's counts on one node. It is safe for
// concurrent use.
type Table struct {
	self        string
	limit       int64
	localCap    int64
	maxPeerKeys int
	standalone  bool

	mu    sync.Mutex
	slots map[uint64]*slot
	peers map[string]*peer
	// left are the incarnations that said goodbye, by name: a report of
	// theirs that arrives after the goodbye (reordered) is ignored. One
	// is forgotten once the transport no longer lists its node.
	left                        map[string]uint64
	round                       uint64 // ticks so far
	lastTick                    int64
	freed                       chan struct{} // closed, and replaced, when a slot may have come free
	acquired, attempts          uint64
	refusedFull, refusedUnheard uint64
	dropped                     uint64 // peers' entries beyond maxPeerKeys
}

// slot is one key's counts: key hash 0 is the limiter's keyless limit.
type slot struct {
	key      uint64
	born     uint64  // the round it was made in
	own      int64   // this node's requests in flight
	unsent   int64   // let in since the last report
	flying   int64   // reported, not yet counted as heard
	landsAt  int64   // when flying counts as heard
	asked    int64   // attempts since the last tick
	refused  int64   // refusals since the last tick
	demand   float64 // attempts a second, smoothed
	dealt    float64 // the demand its share is dealt from (Tick)
	refusing float64 // refusals a second, smoothed
	changed  bool    // to go in the next report
	// From the peers' reports: their sum, and this node's share and the
	// slots kept for peers (reshare).
	others int64
	byPeer map[*peer]*gauge
	share  int64
	kept   int64
}

type gauge struct {
	inFlight, demand, refusing int64
	seq, round                 uint64
}

// peer is what this node keeps of one peer's reports.
type peer struct {
	name  string
	inc   uint64
	round uint64
	keys  map[uint64]*slot
}

// New is a table for a limit of limit requests in flight, on the node
// named self, of a cluster of about nodes nodes (which sets LocalCap);
// it keeps at most maxPeerKeys keys of each peer's.
func New(self string, limit int64, nodes, maxPeerKeys int) *Table {
	return &Table{self: self, limit: limit, localCap: LocalCapFor(limit, nodes), maxPeerKeys: maxPeerKeys,
		slots: map[uint64]*slot{}, peers: map[string]*peer{}, left: map[string]uint64{}, freed: make(chan struct{})}
}

// NewStandalone is a table of a node alone: no local cap, no ticks, and a
// key's slot dropped when its last request is released.
func NewStandalone(limit int64) *Table {
	t := New("", limit, 1, 0)
	t.localCap, t.standalone = math.MaxInt64, true
	return t
}

// LocalCapFor is the most requests a node lets in that its peers may not
// have heard of: an eighth of an even share of the limit, at least one.
func LocalCapFor(limit int64, nodes int) int64 {
	return max(1, limit/int64(8*max(1, nodes)))
}

// Bound is the most requests a cluster of nodes nodes holds at once under
// a limit of limit: the limit, LocalCap per node for the slots beyond the
// shares, and one per node but one, for shares rounded from demands heard
// a few milliseconds apart.
func Bound(limit int64, nodes int) int64 {
	return limit + int64(nodes)*LocalCapFor(limit, nodes) + int64(nodes-1)
}

// LocalCap is the table's.
func (t *Table) LocalCap() int64 { return t.localCap }

// Freed is closed when a slot may have come free (a release, a peer's
// report, a tick); read it again after each wake.
func (t *Table) Freed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.freed
}

func (t *Table) wakeLocked() {
	close(t.freed)
	t.freed = make(chan struct{})
}

func (t *Table) slotLocked(key uint64) *slot {
	s := t.slots[key]
	if s == nil {
		s = &slot{key: key, born: t.round, byPeer: map[*peer]*gauge{}, share: t.limit}
		t.slots[key] = s
	}
	return s
}

// Acquire decides one request for key at now.
func (t *Table) Acquire(key uint64, now int64) Verdict {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slotLocked(key)
	s.asked++
	t.attempts++
	switch {
	case s.own+s.others >= t.limit:
	case s.own < s.share && t.round >= s.born+2:
		// Within this node's share, dealt from demands every node has
		// heard (the slot is a whole round old: a peer asked for the key
		// has reported it): no other node deals it to itself.
		return t.admitLocked(s)
	case s.own+s.others+s.kept >= t.limit && s.own >= s.share: // the free slots are kept for peers
	case s.unheard(now) >= t.localCap:
		t.refusedUnheard++
		return Unheard
	default: // a slot beyond the share, free as far as this node has heard
		return t.admitLocked(s)
	}
	s.refused++
	t.refusedFull++
	return Full
}

func (t *Table) admitLocked(s *slot) Verdict {
	s.own++
	s.unsent++
	s.changed = true
	t.acquired++
	return Admitted
}

func (s *slot) unheard(now int64) int64 {
	if now < s.landsAt {
		return s.unsent + s.flying
	}
	return s.unsent
}

// Release gives back one slot of key's that Acquire let in.
func (t *Table) Release(key uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slots[key]
	if s == nil || s.own == 0 {
		return // the caller releases each slot once; nothing to give back
	}
	s.own--
	s.changed = true
	if t.standalone && s.own == 0 {
		delete(t.slots, key)
	}
	t.wakeLocked()
}

// Count is key's requests in flight: this node's, and the cluster's as
// this node knows it.
func (t *Table) Count(key uint64) (own, cluster int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.slots[key]; s != nil {
		return s.own, s.own + s.others
	}
	return 0, 0
}

// Report is what the next report says: every key that changed, or on a
// tick (all) every key this node holds, is asked for or has just given
// up, with its counts. The requests in it count as heard after
// ReportFlight from now.
func (t *Table) Report(now int64, all bool, to []wire.Gauge) []wire.Gauge {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.slots {
		if !s.changed && !(all && (s.own > 0 || s.demand >= 0.5)) {
			continue
		}
		s.changed = false
		if now < s.landsAt {
			s.flying += s.unsent
		} else {
			s.flying = s.unsent
		}
		s.unsent, s.landsAt = 0, now+ReportFlight
		to = append(to, wire.Gauge{Key: s.key, InFlight: s.own, Demand: perSecond(s.demand), Refusing: perSecond(s.refusing)})
	}
	return to
}

// perSecond is a smoothed rate as a report gives it: whole, rounded up,
// and 0 below half a request a second.
func perSecond(v float64) int64 {
	if v < 0.5 {
		return 0
	}
	n := int64(v)
	if float64(n) < v {
		n++
	}
	return min(n, wire.MaxInFlight)
}

// Totals are the requests this node let in, and was asked for, since it
// started.
func (t *Table) Totals() (acquired, attempts uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.acquired, t.attempts
}

// Refusals counts the requests refused for want of a slot, and the tries
// that met the local cap.
func (t *Table) Refusals() (full, unheard uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refusedFull, t.refusedUnheard
}

// Round is the current tick's number, for the report's frames.
func (t *Table) Round() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.round
}

// Tick is the table's turn every tick: the demand is smoothed, peers no
// longer members (members is the transport's list) are forgotten, and the
// shares are dealt again. Slots nobody holds or asks for are dropped once
// their last report went.
func (t *Table) Tick(now int64, members []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.round++
	dt := now - t.lastTick
	if t.lastTick == 0 || dt <= 0 {
		dt = 0
	}
	t.lastTick = now
	for name, p := range t.peers {
		if !slices.Contains(members, name) {
			t.forgetLocked(p)
		}
	}
	for name := range t.left {
		if !slices.Contains(members, name) {
			delete(t.left, name)
		}
	}
	for key, s := range t.slots {
		s.dealt = s.demand
		if dt > 0 {
			a := min(1, float64(dt)/demandTau)
			perSec := 1e9 / float64(dt)
			s.demand += a * (float64(s.asked)*perSec - s.demand)
			s.refusing += a * (float64(s.refused)*perSec - s.refusing)
		}
		s.asked, s.refused = 0, 0
		// Its share is dealt from the lower of this tick's demand and the
		// last: a rise counts once the peers have it, so that no node
		// deals itself more than the peers deal it.
		s.dealt = min(s.dealt, s.demand)
		if s.own == 0 && !s.changed && s.demand < 0.5 && len(s.byPeer) == 0 {
			delete(t.slots, key)
			continue
		}
		t.reshareLocked(s)
	}
	t.wakeLocked()
}

// Apply takes a peer's gauge frame. keyed is false when the peer hashes
// keys under another secret: its keyed entries are skipped, the keyless
// one kept. A frame of an older incarnation, or older than what is known
// of a key, changes nothing.
func (t *Table) Apply(from string, f *wire.GaugeFrame, keyed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if inc, ok := t.left[from]; ok && f.Incarnation <= inc {
		return
	}
	p := t.peers[from]
	if p != nil && f.Incarnation < p.inc {
		return
	}
	if p != nil && f.Incarnation > p.inc {
		t.forgetLocked(p)
		p = nil
	}
	if f.Leaving {
		t.left[from] = f.Incarnation
		if p != nil {
			t.forgetLocked(p)
			t.wakeLocked()
		}
		return
	}
	if p == nil {
		p = &peer{name: from, inc: f.Incarnation, keys: map[uint64]*slot{}}
		t.peers[from] = p
	}
	if f.Round > p.round {
		p.round = f.Round
		// A key the peer left out of a whole round has gone from it.
		for _, s := range p.keys {
			if g := s.byPeer[p]; g.round+1 < f.Round {
				t.dropLocked(p, s)
			}
		}
	}
	for _, e := range f.Gauges {
		if e.Key != 0 && !keyed {
			continue
		}
		s := p.keys[e.Key]
		if s == nil {
			if e.InFlight == 0 && e.Demand == 0 && e.Refusing == 0 {
				continue
			}
			if len(p.keys) >= t.maxPeerKeys {
				t.dropped++
				continue
			}
			s = t.slotLocked(e.Key)
			s.byPeer[p] = &gauge{}
			p.keys[e.Key] = s
		}
		g := s.byPeer[p]
		if g.seq > f.Seq {
			continue
		}
		s.others += e.InFlight - g.inFlight
		*g = gauge{inFlight: e.InFlight, demand: e.Demand, refusing: e.Refusing, seq: f.Seq, round: f.Round}
		if e.InFlight == 0 && e.Demand == 0 && e.Refusing == 0 {
			t.dropLocked(p, s)
		}
		t.reshareLocked(s)
	}
	t.wakeLocked()
}

// Alone makes the table a node's alone from now on (its limit closed):
// the peers' counts are dropped and the local cap lifted, and waiters
// wake to decide again.
func (t *Table) Alone() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.peers {
		t.forgetLocked(p)
	}
	t.localCap, t.standalone = math.MaxInt64, true
	t.wakeLocked()
}

// Forget drops what peer name reported: it left the cluster.
func (t *Table) Forget(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.peers[name]; p != nil {
		t.forgetLocked(p)
		t.wakeLocked()
	}
}

// Peers counts the peers heard from.
func (t *Table) Peers() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.peers)
}

// DroppedEntries counts the peers' entries beyond the keys kept of each.
func (t *Table) DroppedEntries() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dropped
}

func (t *Table) forgetLocked(p *peer) {
	for _, s := range p.keys {
		t.dropLocked(p, s)
		t.reshareLocked(s)
	}
	delete(t.peers, p.name)
}

func (t *Table) dropLocked(p *peer, s *slot) {
	if g := s.byPeer[p]; g != nil {
		s.others -= g.inFlight
		delete(s.byPeer, p)
	}
	delete(p.keys, s.key)
}

// reshareLocked deals s's limit to the nodes asking for it, in proportion
// to their demand, by largest remainder (ties to the lower name, so every
// node that knows the same demands deals alike), and counts the slots kept
// for refusing peers below their share.
func (t *Table) reshareLocked(s *slot) {
	type claim struct {
		name   string
		weight int64
		g      *gauge
	}
	claims := make([]claim, 0, 1+len(s.byPeer))
	own := perSecond(s.dealt)
	if s.asked > 0 || s.own > 0 {
		own = max(own, 1)
	}
	claims = append(claims, claim{t.self, own, nil})
	total := own
	for p, g := range s.byPeer {
		claims = append(claims, claim{p.name, g.demand, g})
		total += g.demand
	}
	s.kept = 0
	if total == 0 {
		s.share = t.limit
		return
	}
	// Shares in units of total: floor first, then the largest remainders.
	type dealt struct {
		share, rem int64
	}
	deal := make([]dealt, len(claims))
	left := t.limit
	for i, c := range claims {
		q, r := mulDiv(t.limit, c.weight, total)
		deal[i] = dealt{q, r}
		left -= q
	}
	order := make([]int, len(claims))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(deal[b].rem, deal[a].rem); c != 0 {
			return c
		}
		return cmp.Compare(claims[a].name, claims[b].name)
	})
	for _, i := range order[:min(int(left), len(order))] {
		deal[i].share++
	}
	s.share = deal[0].share
	for i, c := range claims[1:] {
		if c.g.refusing > 0 {
			s.kept += max(0, deal[i+1].share-c.g.inFlight)
		}
	}
}

// mulDiv is a·b/c as a quotient and a remainder, for b ≤ c: the product
// of a limit and a demand may pass 2^63, so it is taken in 128 bits.
func mulDiv(a, b, c int64) (q, r int64) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	qq, rr := bits.Div64(hi, lo, uint64(c))
	return int64(qq), int64(rr)
}
