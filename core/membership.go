package gopherpace

import (
	"slices"
	"strconv"
	"time"
)

// The engine's view of the cluster: who is in sight, and what that does to
// the buckets.

// evaluate works out how much of the cluster is in sight and retunes the
// buckets: known members are the peers heard (or listed by the transport)
// within the grace period that have not left; visible ones were heard within
// the isolation timeout.
func (e *engine) evaluate(now int64) {
	if !e.learned && now-e.startedAt > 2*e.interval {
		e.learned = true // nobody older showed up: a founding member
	}
	if e.mode.Load() == modePreContact && now-e.startedAt > e.isolation {
		e.enter(modeNormal)
	}
	listed := e.refreshMembers(now)
	visible, known, heard := 1, 1, int64(1)
	for name, p := range e.peers {
		silent := now - p.lastHeard
		if p.departed || silent > e.grace {
			// Gone, and no longer a member: forget it.
			if !slices.Contains(listed, name) {
				e.stats.lostPrevious.Add(p.missing())
				delete(e.peers, name)
			}
			continue
		}
		known++
		if silent <= e.isolation || !p.heard && silent <= e.firstContact() {
			visible++
		}
		if p.heard && silent <= e.isolation {
			heard++
		}
	}
	e.stats.heard.Store(heard)
	e.retune(now, visible, known)
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
		unit := p.interval
		if split && e.partition != PartitionFailOpen {
			unit = ceilDiv(p.interval*int64(known), int64(visible))
		}
		p.unit.Store(unit)
		if e.floor {
			return // the reference design has neither cap nor early flush
		}
		flushAt := max(1, p.burst/100)
		p.flushAt.Store(flushAt)
		p.localCap.Store(max(2*flushAt, ceilDiv(p.burst, int64(known))))
	})
	closed := e.partition == PartitionFailClosed && visible == 1 && known > 1
	switch m := e.mode.Load(); {
	case closed && m != modeClosed:
		e.enter(modeClosed)
	case !closed && m == modeClosed:
		e.enter(modeNormal)
	}
	switch {
	case split && (!e.degraded || now-e.lastErrLog >= degradedLogEvery):
		e.degraded, e.lastErrLog = true, now
		e.log.Error("cluster partitioned: some peers are out of reach", "node", e.name,
			"visible", visible, "known", known, "policy", e.partition.String(), "admitting", admitting(e.partition, closed, visible, known))
	case !split && e.degraded:
		e.degraded = false
		e.log.Info("cluster whole again: every known peer is in reach", "node", e.name, "nodes", known)
	}
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
