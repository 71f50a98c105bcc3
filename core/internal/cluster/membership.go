package cluster

import (
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/datagram"
)

// The peer view is the engine's view of the cluster: who is a member, who
// is in sight, and what that does to the buckets.
//
// While peers are silent, this node cannot tell a partition from a slow
// network, and every node on each side would otherwise go on refilling at
// the full rate. So the buckets' clock runs slow: a peer silent for longer
// than suspectAfter (a heartbeat and a little) withholds its share of the
// refill, 1/known of the rate, by adding to the lag, the time the buckets'
// clock runs behind the engine's. On both sides of a split the clocks slow
// by the share of the peers out of sight, so together they refill at about
// R. Tokens always cost the same time, so nothing has to be reinterpreted
// when the cluster is whole again; the lag simply stops growing. (Scaling
// the cost of a token instead, as before, turned charges made during a
// partition into several times their tokens after the heal.)
//
// What a silent peer's share withheld is also noted as its predicted
// admits: when the peer turns out to have been only slow (its next frame
// comes within the isolation timeout), its real count is charged less the
// prediction, so a late heartbeat costs nothing. After a longer silence
// the sides are taken to have shared the rate, and the peer's admits from
// that time are not charged at all (see receiver.globalCharge).
//
// It owns the peer records (peers.go) and the lag. The lag and the
// counters are atomic (the request path reads the lag); everything else
// is under the engine's lock, held by the engine's tick and receive, Peers
// and Stats.
type peerView struct {
	*engineEnv
	mode modeSwitch
	// onRefresh runs after every read of the member list (the receiver
	// replays the frames of senders now listed).
	onRefresh func(now int64, added bool)

	lag   atomic.Int64 // how far the buckets' clock runs behind the engine's
	stats viewStats

	// Under the engine's lock.
	// caughtUp is the part of the lag withheld at once, for the past,
	// when a peer heard through relays was suspected (slowClock): the
	// shares' clock does not count it.
	caughtUp int64
	peers    map[string]*peer
	// byName holds the same records in order of name: every pass over the
	// peers goes in this order, so that sums of their rates and the choice
	// among equals come out the same on every run of a simulation (a
	// map's order is random).
	byName            []*peer
	lastMemberRefresh int64 // when the transport's member list was last read
	// listing numbers the reads of the member list; a peer listed by the
	// latest holds its number (peer.listing), so that evaluate needs no
	// search of the list for each peer: at N = 1,000 that was half a
	// million string comparisons a tick.
	listing    uint64
	lastEval   int64 // when evaluate last ran
	degraded   bool
	lastErrLog int64
	splitSince int64 // when peers went out of reach
	// arrived reports news from peers since the sender last looked: a
	// member listed, a frame of a new incarnation or after a silence, or
	// one with counts, more demand or a missing member. An idle node wakes
	// for it (sender.wake).
	arrived bool
	// vouching reports that this node is idle: its idle peers, which send
	// nothing, count as heard while the transport lists them. Set by the
	// sender when it goes idle, cleared by awake.
	vouching     bool
	lastLateWarn int64
	// withheld is the share of the refill this node withheld over its
	// last evaluation for peers out of its own sight.
	withheld float64
	// lastFrame is when a fresh frame last arrived, from anyone, directly
	// or relayed (slackFor).
	lastFrame int64
}

type viewStats struct {
	visible, known, heard atomic.Int64
	lostPrevious          atomic.Uint64
}

func newPeerView(env *engineEnv, mode *modeState, onRefresh func(int64, bool)) peerView {
	return peerView{engineEnv: env, mode: mode, onRefresh: onRefresh, peers: make(map[string]*peer)}
}

// bucketTime converts a time on the engine's clock (or a caller's) to the
// buckets' clock, which runs behind it by the lag built up while peers
// were out of sight. Lock-free.
func (v *peerView) bucketTime(now int64) bucket.Time { return bucket.Time(now - v.lag.Load()) }

// caughtUpLag is the part of the lag withheld at once for time already
// past (slowClock).
func (v *peerView) caughtUpLag() int64 { return v.caughtUp }

// peer is the record of a listed member, or nil.
func (v *peerView) peer(name string) *peer { return v.peers[name] }

// memberRefreshGap spaces the member-list refreshes that a frame from an
// unlisted sender triggers, so that a flood of invented names costs one
// Members call per gap.
const memberRefreshGap = int64(time.Millisecond)

// member returns the peer record of a sender that the transport lists as
// a member, or nil. An unlisted name gets one refresh of the list (at most
// one per memberRefreshGap), for a member that joined since the last tick.
func (v *peerView) member(name string, now int64) *peer {
	if p := v.peers[name]; p != nil {
		return p
	}
	if now-v.lastMemberRefresh < memberRefreshGap {
		return nil
	}
	v.refreshMembers(now)
	return v.peers[name]
}

// refreshMembers reads the transport's member list and gives every listed
// member a peer record. It returns the list.
func (v *peerView) refreshMembers(now int64) []string {
	v.lastMemberRefresh = now
	listed := v.t.Members()
	added := false
	v.listing++
	for _, name := range listed {
		if name != v.name && v.peers[name] == nil {
			p := &peer{name: name, lastHeard: now}
			v.peers[name] = p
			v.byName = append(v.byName, p)
			added = true
		}
		p := v.peers[name]
		if p != nil {
			p.listing = v.listing
		}
		if p != nil && v.vouching {
			// An idle peer sends nothing while it stays idle: while this
			// node is idle too, the transport's failure detector vouches
			// for it instead.
			p.vouchFor(now)
		}
	}
	if added {
		slices.SortFunc(v.byName, func(a, b *peer) int { return strings.Compare(a.name, b.name) })
	}
	v.arrived = v.arrived || added
	v.onRefresh(now, added)
	return listed
}

// stream is p's stream for incarnation inc (see peer.stream); frames a
// replaced stream never received are counted lost.
func (v *peerView) stream(p *peer, inc uint64) *stream {
	s, lost := p.stream(inc)
	v.stats.lostPrevious.Add(lost)
	return s
}

// idle starts this node's vouching for its idle peers: it has no news
// either (sender.flush, on its first idle heartbeat).
func (v *peerView) idle() { v.vouching = true }

// withheldShare is the share of the refill this node withholds for peers
// out of its sight, which its frames report.
func (v *peerView) withheldShare() float64 { return v.withheld }

// partial reports that some known peer is out of sight.
func (v *peerView) partial() bool { return v.stats.visible.Load() < v.stats.known.Load() }

// knownNodes counts this node and the peers it knows.
func (v *peerView) knownNodes() int64 { return v.stats.known.Load() }

// awake ends this node's vouching, for it has news: its idle peers must
// be heard again, and get suspectAfter from now for it (the news that woke
// this node wakes them, and a quiet peer answers at once).
func (v *peerView) awake(now int64) {
	if !v.vouching {
		return
	}
	v.vouching = false
	for _, p := range v.byName {
		p.vouchFor(now)
	}
}

// takeArrival reports whether news came since the last call.
func (v *peerView) takeArrival() bool {
	n := v.arrived
	v.arrived = false
	return n
}

// heard records a fresh frame of stream s from p at now, saying whether
// the sender is leaving or idle, whether it brings news (counts, more
// demand, a missing member), whether it came through relays and what
// share of the refill it withholds, and reports whether the stream was in
// sight before it. A frame of a new stream, or after a silence, is news
// too.
func (v *peerView) heard(p *peer, s *stream, now int64, leaving, idle, news, relayed bool, withheld float64) (wasVisible bool) {
	isolation := v.isolationOf(p, now)
	if relayed && !p.relayed {
		isolation = v.isolation + datagram.RelaySlack(v.tick) // first heard through relays now
	}
	wasVisible = s.charge.synced && now-s.lastHeard <= isolation
	v.arrived = v.arrived || news || !wasVisible
	s.lastHeard, p.lastHeard, p.heard, p.departed, p.relayed, p.owed = now, now, true, leaving, relayed, false
	v.lastFrame = now
	s.withheld, s.idle, p.idle = withheld, idle, idle
	return wasVisible
}

// takePredicted returns the admits predicted for p while it was silent
// (slowClock), and forgets them: a frame from p accounts for them.
func (v *peerView) takePredicted(p *peer) float64 {
	predicted := p.predicted
	p.predicted = 0
	return predicted
}

// activeInSight calls f with the freshest stream of every peer heard
// within the isolation timeout that is not idle: what an idle peer last
// said of its load, level and view is stale, and it offers no load.
func (v *peerView) activeInSight(now int64, f func(*stream)) {
	for _, pr := range v.byName {
		if s := pr.freshest(); s != nil && !s.idle && now-s.lastHeard <= v.isolationOf(pr, now) {
			f(s)
		}
	}
}

// unheard is how many listed peers have not been heard yet and still
// count as in sight (within firstContact): the peers of a node that has
// just joined, or a member that has just joined, before a frame of theirs
// arrives (in a grouped cluster, through relays, up to a few ticks late).
func (v *peerView) unheard(now int64) int {
	n := 0
	for _, p := range v.byName {
		if !p.heard && !p.departed && now-p.lastHeard <= v.firstContact() {
			n++
		}
	}
	return n
}

// eachStream calls f with every stream of every peer.
func (v *peerView) eachStream(f func(*stream)) {
	for _, pr := range v.byName {
		for _, s := range pr.streams {
			f(s)
		}
	}
}

// missing is how many numbered frames are still missing, from every peer
// known and from those forgotten.
func (v *peerView) missing() uint64 {
	n := v.stats.lostPrevious.Load()
	for _, p := range v.byName {
		n += p.missing()
	}
	return n
}

// evaluate works out how much of the cluster is in sight, slows the
// buckets' clock for peers out of sight, and retunes the buckets: known
// members are the peers heard (or listed by the transport) within the
// grace period that have not left; visible ones were heard within the
// isolation timeout.
func (v *peerView) evaluate(now int64) {
	v.refreshMembers(now)
	since := v.lastEval
	v.lastEval = now
	if late := now - since - v.tick; since != 0 && late > v.tick {
		// This tick ran late: this process was short of CPU, and peers'
		// frames may be waiting in its queue. Their silence says nothing
		// about the network, so it neither slows the clock nor counts as a
		// partition this time.
		v.warnf(now, &v.lastLateWarn, "ticks are running late: this process is short of CPU; peers' silence is not taken for a partition meanwhile",
			"late", time.Duration(late))
		return
	}
	visible, known, heard := 1, 1, int64(1)
	var silent, dead []*peer
	kept := v.byName[:0]
	for _, p := range v.byName {
		quiet := now - p.lastHeard
		unlisted := p.listing != v.listing
		gone := p.departed || quiet > v.grace || unlisted && !p.heard
		if gone && unlisted {
			// Gone, and no longer a member: forget it. A member never heard
			// from was known only from the transport's list, so once the
			// list drops it nothing says it was ever there (a replacement
			// that joined just after a crash learns of the crashed node
			// from the list, and would otherwise withhold its share for
			// the whole grace period).
			v.stats.lostPrevious.Add(p.missing())
			delete(v.peers, p.name)
			continue
		}
		kept = append(kept, p)
		if gone {
			continue
		}
		known++
		isolation := v.isolationOf(p, now)
		if quiet <= isolation || !p.heard && quiet <= v.firstContact() {
			visible++
		}
		if p.heard && quiet <= isolation {
			heard++
		}
		if p.heard && quiet > v.suspectOf(p, now) || !p.heard && quiet > v.firstContact() {
			silent = append(silent, p)
			if unlisted {
				dead = append(dead, p)
			}
		}
	}
	clear(v.byName[len(kept):])
	v.byName = kept
	silent, visible, known, yield := v.agreeOnTheDead(now, silent, dead, visible, known)
	v.slowClock(now, since, silent, known, yield)
	v.stats.heard.Store(heard)
	v.retune(now, visible, known)
}

// agreeOnTheDead decides what silent peers stand for: gone, or still
// members whose share of the refill is withheld.
//
// A silent peer that the transport knows to be gone for good
// (GoneReporter: its process died, so its port refuses connections) is
// no longer known, seen from anywhere: the rate is whole again within a
// tick or two of its silence, not after failure detection. So are the
// dead (peers the transport no longer lists: memberlist's failure
// detector, with its indirect probes through other members, has declared
// them failed or left) seen from a strict majority of the known nodes:
// the rate is whole again once the failure detector agrees (seconds),
// not after the grace period. Otherwise a strict minority cannot tell a
// crash of the others from being cut off from a majority that has just
// taken the whole rate back, and neither can a tie. Under the share
// policy the dead keep their share of the refill, withheld, until they
// are heard again or the grace period forgets them: a node whose peers
// all crashed at once serves its share, not nothing, and in a true
// partition the minority's share is admitted beside the majority's whole
// rate, from detection to the heal (docs/operations.md). Under
// fail-closed, which prefers a refusal to an admit too many, a strict
// minority yields instead, refilling nothing (yield). Peers that are
// silent but still listed are a partition, a slow network or a crash not
// yet detected: they keep their share.
func (v *peerView) agreeOnTheDead(now int64, silent, dead []*peer, visible, known int) (_ []*peer, _, _ int, yield bool) {
	gone, _ := v.t.(goneReporter)
	if v.partition == PartitionFailOpen || gone == nil && len(dead) == 0 {
		return silent, visible, known, false
	}
	majority, minority := 2*visible > known, 2*visible < known
	alive := silent[:0:0]
	for _, p := range silent {
		isDead := slices.Contains(dead, p)
		if isDead && majority || gone != nil && gone.Gone(p.name) {
			known--
			if now-p.lastHeard <= v.isolationOf(p, now) {
				visible-- // gone before it was out of sight
			}
			continue
		}
		if isDead {
			yield = yield || v.partition == PartitionFailClosed && minority
		}
		alive = append(alive, p)
	}
	return alive, visible, known, yield
}

// suspectAfter is the silence after which a peer's share of the refill is
// withheld: one heartbeat, plus a fifth of one for jitter.
func (e *engineEnv) suspectAfter() int64 { return e.tick + e.tick/5 }

// suspectOf is suspectAfter for p: RelaySlack longer for a peer heard
// through relays, while relays arrive.
func (v *peerView) suspectOf(p *peer, now int64) int64 { return v.suspectAfter() + v.slackFor(p, now) }

// isolationOf is the isolation timeout for p: RelaySlack longer for a
// peer heard through relays, while relays arrive.
func (v *peerView) isolationOf(p *peer, now int64) int64 { return v.isolation + v.slackFor(p, now) }

// slackFor is how much longer than a peer of its own group a peer heard
// through relays may be silent: RelaySlack while frames keep arriving
// from anyone, none once nothing at all has arrived for suspectAfter. A
// node cut off from the cluster hears nobody, and so counts everyone out
// of sight as soon as it would with every frame sent to every peer
// (waiting out the slack, a node cut off from 100 admitted 77 a second
// for a second, not 10). Relayed frames alone are no sign: in a lightly
// used cluster, where most nodes are idle, they come seldom, and 64
// replicas over real memberlist took their peers for gone every few
// seconds.
func (v *peerView) slackFor(p *peer, now int64) int64 {
	if !p.relayed || now-v.lastFrame > v.suspectAfter() {
		return 0
	}
	return datagram.RelaySlack(v.tick)
}

// slowClock adds to the lag, for the time since the last evaluation, each
// silent peer's share of the refill, and notes it as the peer's predicted
// admits. It withholds at least the share that the peers in sight
// typically withhold (the median of what they report): a node that joined
// after a peer crashed does not know of the crashed one, which the others
// still count for the grace period, and would otherwise refill faster than
// they do. The median keeps one peer with an odd view (one that is itself
// cut off from the rest) from holding everyone back.
func (v *peerView) slowClock(now, since int64, silent []*peer, known int, yield bool) {
	v.withheld = 0
	if v.partition == PartitionFailOpen || since == 0 || now <= since {
		return
	}
	if yield {
		// A strict minority under fail-closed, which may be cut off from a
		// majority that has taken the rate back (agreeOnTheDead): the
		// buckets' clock stands still.
		v.withheld = 1
		v.lag.Add(now - since)
		return
	}
	rule := v.rules.Default()
	var lag, caughtUp int64
	for _, pr := range silent {
		from := max(since, pr.lastHeard+v.suspectOf(pr, now))
		if now <= from {
			continue
		}
		if pr.relayed && !pr.owed {
			// A peer heard through relays is suspected RelaySlack later
			// than a mate: its share of that time is withheld now, at
			// once, as the mate's would have been all along (a 50/50
			// split of 100 nodes admitted 1.2% over in 15 s, all of it
			// in the slack, without this).
			early := min(from, max(0, pr.lastHeard+v.suspectAfter()))
			caughtUp += (from - early) / int64(known)
			from, pr.owed = early, true
		}
		share := (now - from) / int64(known)
		lag += share
		pr.predicted += float64(share) / float64(rule.Interval)
	}
	// What is reported is only this node's own share, never one adopted
	// from a peer: adopted shares passed around would sustain each other
	// after every node had heard the silent peer go.
	span := float64(now - since)
	v.withheld = min(float64(lag)/span, 1)
	var reported []float64
	v.activeInSight(now, func(s *stream) { reported = append(reported, s.withheld) })
	if len(reported) > 0 {
		slices.Sort(reported)
		if typical := reported[(len(reported)-1)/2]; typical*span > float64(lag) {
			lag = int64(typical * span)
		}
	}
	if lag > 0 {
		v.lag.Add(lag)
		v.caughtUp += min(caughtUp, lag)
	}
}

// firstContact is how long a listed peer that has never been heard still
// counts as in sight.
func (e *engineEnv) firstContact() int64 { return max(int64(2*time.Second), 10*e.interval) }

// retune applies visibility to the rules, the mode and the logs.
func (v *peerView) retune(now int64, visible, known int) {
	v.stats.visible.Store(int64(visible))
	v.stats.known.Store(int64(known))
	split := visible < known
	v.rules.Each(func(rule *bucket.Rule) {
		if v.floor {
			return // the reference design has neither cap nor early flush
		}
		bucket.SizeCaps(rule, known)
	})
	closed := v.partition == PartitionFailClosed && visible == 1 && known > 1
	switch m := v.mode.get(); {
	case closed && m != modeFailClosed:
		v.mode.enter(modeFailClosed)
	case !closed && m == modeFailClosed:
		v.mode.enter(modeNormal)
	}
	// A peer out of reach for a moment is often only slow (a pause, a
	// starved process): say so at WARN. Still out of reach after
	// partitionAfter, it is a partition: ERROR, then again every
	// degradedLogEvery while it lasts.
	args := []any{"node", v.name, "visible", visible, "known", known, "policy", v.partition.String(),
		"admitting", admitting(v.partition, closed, visible, known)}
	switch {
	case split && !v.degraded:
		v.degraded, v.splitSince, v.lastErrLog = true, now, 0
		v.log.Warn("peers out of reach; taking their share of the rate out until they are back", args...)
	case split && now-v.splitSince >= partitionAfter && (v.lastErrLog == 0 || now-v.lastErrLog >= degradedLogEvery):
		v.lastErrLog = now
		v.log.Error("cluster partitioned: some peers are out of reach", append(args, "for", time.Duration(now-v.splitSince))...)
	case !split && v.degraded:
		v.degraded = false
		v.log.Info("cluster whole again: every known peer is in reach", "node", v.name, "nodes", known,
			"after", time.Duration(now-v.splitSince))
	}
}

func admitting(p Partition, closed bool, visible, known int) string {
	switch {
	case closed:
		return "nothing (fail-closed)"
	case p == PartitionFailOpen:
		return "the full rate (fail-open)"
	}
	return "a share of the rate: " + strconv.Itoa(visible) + "/" + strconv.Itoa(known)
}
