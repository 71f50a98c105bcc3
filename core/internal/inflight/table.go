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
//   - it holds fewer than its share: the others deal themselves the rest
//     of the limit, so these need no word from the peers, however late
//     their reports arrive; or
//   - it has taken fewer than LocalCap slots beyond its share since its
//     last tick, holds fewer than LocalCap beyond its fair share, and the
//     free slot is not kept for a peer (a peer that
//     refuses requests and holds fewer than its share has the difference
//     kept for it, so a busy node cannot take every slot a quieter one
//     frees).
//
// A node newly asked for a key (within demandWindow rounds of its first
// request, or of its first after a pause, and until every peer has been
// heard after them) has no share yet, as its peers may not know its
// demand: it fills at most an even split of the limit. So the cluster
// holds at most Bound while reports arrive within demandWindow−1 ticks
// (docs/design.md, "In-flight limits").
package inflight

import (
	"cmp"
	"math/bits"
	"slices"
	"sync"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// maxSpare bounds the slots a standalone table keeps for reuse.
const maxSpare = 64

// demandTau is the time constant of the demand's smoothing (ns).
const demandTau = 500_000_000

// demandWindow is how many ticks a share's demands are read over: a node
// deals itself the least of its own demands at its last demandWindow
// ticks, and each peer the most it reported over as many of its rounds.
// Each node then deals itself no more than the others deal it, so the
// fair shares add up to no more than the limit while reports arrive
// within demandWindow−1 ticks (a busy process reads them late).
const demandWindow = 4

// Verdict is what Acquire decided.
type Verdict uint8

const (
	// Admitted: the request holds a slot until Release.
	Admitted Verdict = iota
	// Full: the cluster's slots, or those free for this node, are taken.
	Full
	// Capped: a slot is free beyond this node's share, but it took
	// LocalCap of those since its last tick.
	Capped
)

// A Table is one in-flight limiter's counts on one node. It is safe for
// concurrent use.
type Table struct {
	self        string
	limit       int64
	localCap    int64
	nodes       int // this one and its members, at the last tick
	maxPeerKeys int
	standalone  bool

	mu    sync.Mutex
	slots map[uint64]*slot
	peers map[string]*peer
	// left are the incarnations that said goodbye, by name: a report of
	// theirs that arrives after the goodbye (reordered) is ignored. One
	// is forgotten once the transport no longer lists its node.
	left                       map[string]uint64
	round                      uint64 // ticks so far
	lastTick                   int64
	freed                      chan struct{} // closed when a slot may have come free; made by Freed
	acquired, attempts         uint64
	refusedFull, refusedCapped uint64
	dropped                    uint64 // peers' entries beyond maxPeerKeys
	// spare are slots a standalone table dropped, kept for the next keys:
	// a semaphore taken and given back makes no slot each time.
	spare []*slot
}

// slot is one key's counts: key hash 0 is the limiter's keyless limit.
type slot struct {
	key uint64
	// asking says this node has been asked for the key since the round
	// askedFrom; it stops when a tick finds its demand gone.
	asking    bool
	askedFrom uint64
	// settled: demandWindow rounds have passed since askedFrom, and
	// every peer has been heard since then (settledLocked).
	settled  bool
	own      int64   // this node's requests in flight
	borrowed int64   // slots taken beyond the share since the last tick
	asked    int64   // attempts since the last tick
	refused  int64   // refusals since the last tick
	demand   float64 // attempts a second, smoothed
	// recent are the demands at the last ticks, by round: the least is
	// what its share is dealt from.
	recent   [demandWindow]float64
	refusing float64 // refusals a second, smoothed
	changed  bool    // to go in the next report
	// From the peers' reports: their sum, and this node's share and the
	// slots kept for peers (reshare).
	others int64
	byPeer map[*peer]*gauge
	share  int64 // what it may fill unheard (with fair): the safe share
	fair   int64 // its share by demand alone
	kept   int64
}

type gauge struct {
	inFlight, demand, refusing int64
	seq, round                 uint64
	// peak is the most demand reported in each of this node's last
	// rounds (peakRound), by round: the most is what the peer is dealt.
	peak      [demandWindow]int64
	peakRound [demandWindow]uint64
}

// heard records a report of d requests a second in round.
func (g *gauge) heard(d int64, round uint64) {
	i := round % demandWindow
	if g.peakRound[i] != round {
		g.peak[i], g.peakRound[i] = 0, round
	}
	g.peak[i] = max(g.peak[i], d)
}

// dealt is the demand the peer is dealt from in round: the most it
// reported over the window, or its last report if older.
func (g *gauge) dealt(round uint64) int64 {
	d := g.demand
	for i, r := range g.peakRound {
		if r+demandWindow > round {
			d = max(d, g.peak[i])
		}
	}
	return d
}

// peer is what this node keeps of one peer's reports.
type peer struct {
	name  string
	inc   uint64
	round uint64
	keys  map[uint64]*slot
	// heard is this node's round when the peer's last frame came.
	heard uint64
}

// New is a table for a limit of limit requests in flight, on the node
// named self, of a cluster of about nodes nodes (which sets LocalCap);
// it keeps at most maxPeerKeys keys of each peer's.
func New(self string, limit int64, nodes, maxPeerKeys int) *Table {
	return &Table{self: self, limit: limit, localCap: LocalCapFor(limit, nodes), nodes: max(1, nodes), maxPeerKeys: maxPeerKeys,
		slots: map[uint64]*slot{}, peers: map[string]*peer{}, left: map[string]uint64{}}
}

// NewStandalone is a table of a node alone: no shares, no ticks, and a
// key's slot dropped when its last request is released.
func NewStandalone(limit int64) *Table {
	t := New("", limit, 1, 0)
	t.standalone = true
	return t
}

// LocalCapFor is the most slots a node takes beyond its share in a tick
// (a tick's reports are what its peers may not have heard yet): an
// eighth of an even split of the limit, at least one.
func LocalCapFor(limit int64, nodes int) int64 {
	return max(1, limit/int64(8*max(1, nodes)))
}

// Bound is the most requests a cluster of nodes nodes holds at once under
// a limit of limit: the limit, LocalCap per node for the slots beyond the
// shares, and one per node but one, for shares (and even splits) rounded
// up from demands heard a few milliseconds apart.
func Bound(limit int64, nodes int) int64 {
	return limit + int64(nodes)*LocalCapFor(limit, nodes) + int64(nodes-1)
}

// SetNodes says how many nodes the cluster has, this one included, when
// the member list is read between ticks: a young key's even split.
func (t *Table) SetNodes(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nodes = max(1, n)
}

// Freed is closed when a slot may have come free (a release, a peer's
// report, a tick); read it again after each wake.
func (t *Table) Freed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.freed == nil {
		t.freed = make(chan struct{})
	}
	return t.freed
}

// wakeLocked wakes the waiters, if any: with none, nothing is made.
func (t *Table) wakeLocked() {
	if t.freed != nil {
		close(t.freed)
		t.freed = nil
	}
}

func (t *Table) slotLocked(key uint64) *slot {
	s := t.slots[key]
	if s == nil {
		if n := len(t.spare); n > 0 {
			s, t.spare = t.spare[n-1], t.spare[:n-1]
			*s = slot{}
		} else {
			s = new(slot)
		}
		s.key, s.share = key, t.limit
		t.slots[key] = s
	}
	return s
}

// Acquire decides one request for key.
func (t *Table) Acquire(key uint64) Verdict {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slotLocked(key)
	s.asked++
	t.attempts++
	if !s.asking {
		s.asking, s.settled, s.askedFrom = true, false, t.round
	}
	switch {
	case s.own+s.others >= t.limit:
	case t.standalone:
		return t.admitLocked(s)
	case !t.settledLocked(s):
		// Newly asked for here: the peers do not know this node's demand
		// yet, and any of them may have just begun too, so every such
		// node fills at most an even split.
		if n := int64(max(t.nodes, 1+len(t.peers))); s.own < (t.limit+n-1)/n {
			return t.admitLocked(s)
		}
	case s.own < min(s.share, s.fair):
		return t.admitLocked(s)
	case s.own+s.others+s.kept >= t.limit && s.own >= s.fair: // the free slots are kept for peers
	case s.borrowed >= t.localCap || s.own >= s.fair+t.localCap:
		s.refused++
		t.refusedCapped++
		return Capped
	default: // a slot beyond the share, free as far as this node has heard
		s.borrowed++
		return t.admitLocked(s)
	}
	s.refused++
	t.refusedFull++
	return Full
}

// settledLocked reports whether s has left its first rounds:
// demandWindow of this node's rounds since it was first asked for the
// key, and a frame from every member heard after those. A frame heard
// sooner may have been sent before the peer heard this node's demand, or
// before it began itself: reports may come up to demandWindow−1 ticks
// late (a busy process reads them late), and a node that deals from such
// a frame takes the whole limit while its peer does the same.
func (t *Table) settledLocked(s *slot) bool {
	if s.settled {
		return true
	}
	settle := s.askedFrom + demandWindow
	if t.round < settle || len(t.peers) < t.nodes-1 {
		return false
	}
	for _, p := range t.peers {
		if p.heard < settle {
			return false
		}
	}
	s.settled = true
	return true
}

func (t *Table) admitLocked(s *slot) Verdict {
	s.own++
	s.changed = true
	t.acquired++
	return Admitted
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
		if len(t.spare) < maxSpare {
			t.spare = append(t.spare, s)
		}
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
// tick (all) every key this node holds or is asked for, with its counts.
func (t *Table) Report(all bool, to []wire.Gauge) []wire.Gauge {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.slots {
		if !s.changed && !(all && (s.own > 0 || s.demand >= 0.5)) {
			continue
		}
		s.changed = false
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

// Counts are a table's counters, read at one instant: the requests let
// in and asked for since it started, those refused for want of a slot
// and at the local cap (Capped), the peers heard, and the peers' entries
// beyond the keys kept of each.
type Counts struct {
	Acquired, Attempts, RefusedFull, RefusedCapped uint64
	Peers                                          int
	DroppedEntries                                 uint64
}

// Counts reads the counters.
func (t *Table) Counts() Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Counts{t.acquired, t.attempts, t.refusedFull, t.refusedCapped, len(t.peers), t.dropped}
}

// Round is the current tick's number, for the report's frames.
func (t *Table) Round() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.round
}

// Tick is the table's turn every tick: the demand is smoothed, peers no
// longer members (members is the transport's list) and silent for two
// rounds are forgotten, and the shares are dealt again. Slots nobody
// holds or asks for are dropped once their last report went.
func (t *Table) Tick(now int64, members []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.round++
	t.nodes = 1 + len(members)
	dt := now - t.lastTick
	if t.lastTick == 0 || dt <= 0 {
		dt = 0
	}
	t.lastTick = now
	for name, p := range t.peers {
		// Gone from the member list and silent for two rounds: a node
		// the failure detector wrongly declared dead (a busy process slow
		// to answer its probes) still reports, and keeps its slots.
		if !slices.Contains(members, name) && t.round >= p.heard+2 {
			t.forgetLocked(p)
		}
	}
	for name := range t.left {
		if !slices.Contains(members, name) {
			delete(t.left, name)
		}
	}
	for key, s := range t.slots {
		// A tick that finds no time passed (the first) leaves the counts
		// to the next.
		if dt > 0 {
			a := min(1, float64(dt)/demandTau)
			perSec := 1e9 / float64(dt)
			s.demand += a * (float64(s.asked)*perSec - s.demand)
			s.refusing += a * (float64(s.refused)*perSec - s.refusing)
			s.recent[t.round%demandWindow] = s.demand
			if s.asked == 0 && s.demand < 0.5 {
				s.asking = false
			}
			s.asked, s.refused = 0, 0
		}
		s.borrowed = 0
		if s.own == 0 && !s.changed && !s.asking && s.demand < 0.5 && len(s.byPeer) == 0 {
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
	p.heard = t.round
	if f.Round > p.round {
		p.round = f.Round
		// A key the peer left out of two whole rounds has gone from it
		// (one round's report may be lost: dropping a key the peer still
		// holds would let the others overfill).
		for _, s := range p.keys {
			if g := s.byPeer[p]; g.round+2 < f.Round {
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
			if s.byPeer == nil {
				s.byPeer = map[*peer]*gauge{}
			}
			s.byPeer[p] = &gauge{}
			p.keys[e.Key] = s
		}
		g := s.byPeer[p]
		if g.seq > f.Seq {
			continue
		}
		s.others += e.InFlight - g.inFlight
		g.inFlight, g.demand, g.refusing, g.seq, g.round = e.InFlight, e.Demand, e.Refusing, f.Seq, f.Round
		g.heard(e.Demand, t.round)
		if e.InFlight == 0 && e.Demand == 0 && e.Refusing == 0 {
			t.dropLocked(p, s)
		}
		t.reshareLocked(s)
	}
	t.wakeLocked()
}

// Alone makes the table a node's alone from now on (its limit closed):
// the peers' counts are dropped, it decides as a node alone, and waiters
// wake to decide again.
func (t *Table) Alone() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.peers {
		t.forgetLocked(p)
	}
	t.standalone = true
	t.wakeLocked()
}

// Knows reports whether name's reports are counted: a peer heard and not
// yet forgotten.
func (t *Table) Knows(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.peers[name] != nil
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

// reshareLocked deals s's limit to the nodes (reshare), and counts the
// slots kept for refusing peers below their share.
func (t *Table) reshareLocked(s *slot) {
	claims := make([]claim, 0, 1+len(s.byPeer))
	// A rise of this node's demand counts once its peers have it, and a
	// fall of a peer's once this node has it for the whole window: no
	// node deals itself more than the others deal it (demandWindow).
	own := perSecond(slices.Min(s.recent[:]))
	if s.asked > 0 || s.own > 0 {
		own = max(own, 1)
	}
	claims = append(claims, claim{name: t.self, weight: own, held: s.own})
	for p, g := range s.byPeer {
		claims = append(claims, claim{name: p.name, weight: g.dealt(t.round), held: g.inFlight, refusing: g.refusing > 0})
	}
	// The fair shares, by demand alone, say which slots are kept for
	// refusing peers and when this node borrows; the safe ones, which
	// leave every node what it holds, say what it may fill unheard.
	deal(t.limit, claims, false)
	s.fair, s.kept = claims[0].share, 0
	for _, c := range claims[1:] {
		if c.refusing {
			s.kept += max(0, c.share-c.held)
		}
	}
	deal(t.limit, claims, true)
	s.share = claims[0].share
}

// claim is one node's part in a key's dealing: its demand, the slots it
// holds, and the share dealt to it.
type claim struct {
	name     string
	weight   int64
	held     int64
	refusing bool
	share    int64
	fixed    bool
	rem      int64
}

// deal deals limit to claims in proportion to their weights, by largest
// remainder (ties to the lower name, so that every node that knows the
// same claims deals alike). With keepHeld, a node that holds more than
// its part keeps
// what it holds as its share, and the rest is dealt again among the
// others: the shares then never add up to more than the limit, however
// the slots were taken (a node whose demand fell, or one that holds slots
// and is asked for none). With no weight at all, each node's share is
// what it holds and the rest of the limit is everyone's: every share is
// the limit less the others' holdings.
func deal(limit int64, claims []claim, keepHeld bool) {
	for i := range claims {
		claims[i].fixed = false
	}
	for {
		left, total := limit, int64(0)
		for _, c := range claims {
			if c.fixed {
				left -= c.held
			} else {
				total += c.weight
			}
		}
		left = max(left, 0)
		if total == 0 {
			for i := range claims {
				if !claims[i].fixed {
					claims[i].share = claims[i].held + left
				}
			}
			return
		}
		rest := left
		for i := range claims {
			c := &claims[i]
			if c.fixed {
				c.share = c.held
				continue
			}
			c.share, c.rem = mulDiv(left, c.weight, total)
			rest -= c.share
		}
		order := make([]int, 0, len(claims))
		for i, c := range claims {
			if !c.fixed {
				order = append(order, i)
			}
		}
		slices.SortFunc(order, func(a, b int) int {
			if c := cmp.Compare(claims[b].rem, claims[a].rem); c != 0 {
				return c
			}
			return cmp.Compare(claims[a].name, claims[b].name)
		})
		for _, i := range order[:min(int(rest), len(order))] {
			claims[i].share++
		}
		again := false
		for i := range claims {
			if !keepHeld {
				break
			}
			if c := &claims[i]; !c.fixed && c.held > c.share {
				c.fixed, again = true, true
			}
		}
		if !again {
			return
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
