package cluster

import "sync/atomic"

// The engine's mode tells the request path how to treat a clustered
// limiter's requests. The request path only reads it; enter, called with
// the engine's lock held, is the only place that changes it:
//
//	New ─ peers listed ─▶ preContact ── first frame from a peer, ─┐
//	 │                                  or isolation timeout       │
//	 └── no peers listed ────────────────────────────────────────▶ normal
//	                                                              │   ▲
//	                 fail-closed, and every known peer out of sight   │ a peer in sight again
//	                                                              ▼   │
//	                                                          failClosed
//	any mode ── Close ──▶ stopped (final)
const (
	// modeNormal: the global bucket is the counted word; admits are
	// counted for gossip, within the local cap.
	modeNormal int32 = iota
	// modePreContact: just started with peers listed but none heard yet;
	// this node may spend only its share of the global bucket.
	modePreContact
	// modeFailClosed: under the fail-closed policy, cut off from every
	// peer: admit nothing.
	modeFailClosed
	// modeStopped: the limiter was closed; decide standalone.
	modeStopped
)

// modeState is the engine's mode and what it needs: the request path reads
// them lock-free; enter, called with the engine's lock held, is the only
// place that changes the mode.
type modeState struct {
	cur atomic.Int32
	// preBudget is what is left of this node's share of the bucket while
	// in modePreContact (lock-free: the request path spends it).
	preBudget atomic.Int64
	// begun is set once start has chosen the first mode (under the lock).
	begun bool
}

// begin chooses the first mode, once, at the engine's start: pre-contact
// with this node's share of the bucket, budget, when peers are listed
// (contact), else normal. The caller holds the engine's lock.
func (m *modeState) begin(contact bool, budget int64) {
	if contact {
		m.preBudget.Store(budget)
		m.enter(modePreContact)
	}
	m.begun = true
}

// spendPreContact takes n tokens of the pre-contact budget, lock-free,
// and reports whether it held them; returnPreContact gives them back (a
// take that then failed).
func (m *modeState) spendPreContact(n int64) bool {
	if m.preBudget.Add(-n) < 0 {
		m.preBudget.Add(n)
		return false
	}
	return true
}

func (m *modeState) returnPreContact(n int64) { m.preBudget.Add(n) }

// get is the mode in force.
func (m *modeState) get() int32 { return m.cur.Load() }

// enter moves the engine to mode to, if that is a transition the diagram
// above allows, and reports whether it did. The caller holds the engine's
// lock.
func (m *modeState) enter(to int32) bool {
	from := m.cur.Load()
	allowed := false
	switch to {
	case modeNormal:
		allowed = from == modePreContact || from == modeFailClosed
	case modePreContact:
		allowed = from == modeNormal && !m.begun
	case modeFailClosed:
		allowed = from == modeNormal || from == modePreContact
	case modeStopped:
		allowed = from != modeStopped
	}
	if allowed {
		m.cur.Store(to)
	}
	return allowed
}
