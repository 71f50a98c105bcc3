package gopherpace

import (
	"slices"
	"strconv"
	"time"
)

// The engine's view of the cluster: who is in sight, and what that does to
// the buckets.
//
// While peers are silent, this node cannot tell a partition from a slow
// network, and every node on each side would otherwise go on refilling at
// the full rate. So the buckets' clock runs slow: a peer silent for longer
// than suspectAfter (a heartbeat and a little) withholds its share of the
// refill, 1/known of the rate, by adding to the engine's lag, the time the
// buckets' clock runs behind the engine's. On both sides of a split the
// clocks slow by the share of the peers out of sight, so together they
// refill at about R. Tokens always cost the same time, so nothing has to be
// reinterpreted when the cluster is whole again; the lag simply stops
// growing. (Scaling the cost of a token instead, as before, turned charges
// made during a partition into several times their tokens after the heal.)
//
// What a silent peer's share withheld is also noted as its predicted
// admits: when the peer turns out to have been only slow (its next frame
// comes within the isolation timeout), its real count is charged less the
// prediction, so a late heartbeat costs nothing. After a longer silence
// the sides are taken to have shared the rate, and the peer's admits from
// that time are not charged at all (see globalCharge).

// evaluate works out how much of the cluster is in sight, slows the
// buckets' clock for peers out of sight, and retunes the buckets: known
// members are the peers heard (or listed by the transport) within the
// grace period that have not left; visible ones were heard within the
// isolation timeout.
func (e *engine) evaluate(now int64) {
	if !e.learned && now-e.startedAt > 2*e.interval {
		e.learned = true // nobody older showed up: a founding member
	}
	if e.mode.Load() == modePreContact && now-e.startedAt > e.isolation {
		e.enter(modeNormal)
	}
	listed := e.refreshMembers(now)
	since := e.lastEval
	e.lastEval = now
	if late := now - since - e.tick; since != 0 && late > e.tick {
		// This tick ran late: this process was short of CPU, and peers'
		// frames may be waiting in its queue. Their silence says nothing
		// about the network, so it neither slows the clock nor counts as a
		// partition this time.
		e.warnf(now, &e.lastLateWarn, "ticks are running late: this process is short of CPU; peers' silence is not taken for a partition meanwhile",
			"late", time.Duration(late))
		return
	}
	visible, known, heard := 1, 1, int64(1)
	var silent, dead []*peer
	for name, p := range e.peers {
		quiet := now - p.lastHeard
		unlisted := !slices.Contains(listed, name)
		if p.departed || quiet > e.grace || unlisted && !p.heard {
			// Gone, and no longer a member: forget it. A member never heard
			// from was known only from the transport's list, so once the
			// list drops it nothing says it was ever there (a replacement
			// that joined just after a crash learns of the crashed node
			// from the list, and would otherwise withhold its share for
			// the whole grace period).
			if unlisted {
				e.stats.lostPrevious.Add(p.missing())
				delete(e.peers, name)
			}
			continue
		}
		known++
		if quiet <= e.isolation || !p.heard && quiet <= e.firstContact() {
			visible++
		}
		if p.heard && quiet <= e.isolation {
			heard++
		}
		if p.heard && quiet > e.suspectAfter() || !p.heard && quiet > e.firstContact() {
			silent = append(silent, p)
			if unlisted {
				dead = append(dead, p)
			}
		}
	}
	silent, known, yield := e.agreeOnTheDead(silent, dead, visible, known)
	e.slowClock(now, since, silent, known, yield)
	e.stats.heard.Store(heard)
	e.retune(now, visible, known)
}

// agreeOnTheDead decides what silent peers that the transport no longer
// lists (dead: memberlist's failure detector, with its indirect probes
// through other members, has declared them failed or left) stand for.
//
// Seen from a strict majority of the known nodes, they crashed or left:
// they are no longer known, so the rate is whole again as soon as the
// failure detector agrees (seconds), not after the grace period. A strict
// minority cannot tell a crash of the others from being cut off from them,
// and in a partition the majority side has just taken the whole rate
// back: so it yields, refilling nothing until the grace period ends
// (yield). A tie (two nodes, or 2 of 4) keeps sharing as before, since
// neither side can claim the rate. Peers that are silent but still listed
// are always a partition or a slow network: they keep their share.
func (e *engine) agreeOnTheDead(silent, dead []*peer, visible, known int) (_ []*peer, _ int, yield bool) {
	if len(dead) == 0 || e.partition == PartitionFailOpen {
		return silent, known, false
	}
	switch {
	case 2*visible > known:
		alive := silent[:0:0]
		for _, p := range silent {
			if !slices.Contains(dead, p) {
				alive = append(alive, p)
			}
		}
		return alive, known - len(dead), false
	case 2*visible < known:
		return silent, known, true
	}
	return silent, known, false
}

// suspectAfter is the silence after which a peer's share of the refill is
// withheld: one heartbeat, plus a fifth of one for jitter.
func (e *engine) suspectAfter() int64 { return e.tick + e.tick/5 }

// slowClock adds to the lag, for the time since the last evaluation, each
// silent peer's share of the refill, and notes it as the peer's predicted
// admits. It withholds at least the share that the peers in sight
// typically withhold (the median of what they report): a node that joined
// after a peer crashed does not know of the crashed one, which the others
// still count for the grace period, and would otherwise refill faster than
// they do. The median keeps one peer with an odd view (one that is itself
// cut off from the rest) from holding everyone back.
func (e *engine) slowClock(now, since int64, silent []*peer, known int, yield bool) {
	e.withheld = 0
	if e.partition == PartitionFailOpen || since == 0 || now <= since {
		return
	}
	if yield {
		// A strict minority, cut off from a majority that has taken the
		// rate back (agreeOnTheDead): the buckets' clock stands still.
		e.withheld = 1
		e.lag.Add(now - since)
		return
	}
	p := e.pols.dflt()
	var lag int64
	for _, pr := range silent {
		from := max(since, pr.lastHeard+e.suspectAfter())
		if now <= from {
			continue
		}
		share := (now - from) / int64(known)
		lag += share
		pr.predicted += float64(share) / float64(p.interval)
	}
	// What is reported is only this node's own share, never one adopted
	// from a peer: adopted shares passed around would sustain each other
	// after every node had heard the silent peer go.
	span := float64(now - since)
	e.withheld = min(float64(lag)/span, 1)
	var reported []float64
	for _, pr := range e.peers {
		if s := pr.freshest(); s != nil && now-s.lastHeard <= e.isolation {
			reported = append(reported, s.withheld)
		}
	}
	if len(reported) > 0 {
		slices.Sort(reported)
		if typical := reported[(len(reported)-1)/2]; typical*span > float64(lag) {
			lag = int64(typical * span)
		}
	}
	if lag > 0 {
		e.lag.Add(lag)
	}
}

// firstContact is how long a listed peer that has never been heard still
// counts as in sight.
func (e *engine) firstContact() int64 { return max(int64(2*time.Second), 10*e.interval) }

// retune applies visibility to the policies, the mode and the logs.
func (e *engine) retune(now int64, visible, known int) {
	e.stats.visible.Store(int64(visible))
	e.stats.known.Store(int64(known))
	split := visible < known
	e.pols.each(func(p *policy) {
		if e.floor {
			return // the reference design has neither cap nor early flush
		}
		e.sizeCaps(p, known)
	})
	closed := e.partition == PartitionFailClosed && visible == 1 && known > 1
	switch m := e.mode.Load(); {
	case closed && m != modeClosed:
		e.enter(modeClosed)
	case !closed && m == modeClosed:
		e.enter(modeNormal)
	}
	// A peer out of reach for a moment is often only slow (a pause, a
	// starved process): say so at WARN. Still out of reach after
	// partitionAfter, it is a partition: ERROR, then again every
	// degradedLogEvery while it lasts.
	args := []any{"node", e.name, "visible", visible, "known", known, "policy", e.partition.String(),
		"admitting", admitting(e.partition, closed, visible, known)}
	switch {
	case split && !e.degraded:
		e.degraded, e.splitSince, e.lastErrLog = true, now, 0
		e.log.Warn("peers out of reach; taking their share of the rate out until they are back", args...)
	case split && now-e.splitSince >= partitionAfter && (e.lastErrLog == 0 || now-e.lastErrLog >= degradedLogEvery):
		e.lastErrLog = now
		e.log.Error("cluster partitioned: some peers are out of reach", append(args, "for", time.Duration(now-e.splitSince))...)
	case !split && e.degraded:
		e.degraded = false
		e.log.Info("cluster whole again: every known peer is in reach", "node", e.name, "nodes", known,
			"after", time.Duration(now-e.splitSince))
	}
}

// sizeCaps sets p's early-flush threshold and its cap of unreported
// tokens for a cluster of known nodes.
func (e *engine) sizeCaps(p *policy, known int) {
	flushAt := max(1, p.burst/100)
	p.flushAt.Store(flushAt)
	p.localCap.Store(max(2*flushAt, ceilDiv(p.burst, int64(known))))
}

func admitting(p PartitionPolicy, closed bool, visible, known int) string {
	switch {
	case closed:
		return "nothing (fail-closed)"
	case p == PartitionFailOpen:
		return "the full rate (fail-open)"
	}
	return "a share of the rate: " + strconv.Itoa(visible) + "/" + strconv.Itoa(known)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
