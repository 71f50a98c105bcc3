package gopherpace

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
//	                                                              closed
//	any mode ── Close ──▶ stopped (final)
const (
	// modeNormal: the global bucket is the counted word; admits are
	// counted for gossip, within the local cap.
	modeNormal int32 = iota
	// modePreContact: just started with peers listed but none heard yet;
	// this node may spend only its share of the global burst.
	modePreContact
	// modeClosed: fail-closed and cut off from every peer: admit nothing.
	modeClosed
	// modeStopped: the limiter was closed; decide standalone.
	modeStopped
)

// enter moves the engine to mode to, if that is a transition the diagram
// above allows, and reports whether it did. The caller holds e.mu.
func (e *engine) enter(to int32) bool {
	from := e.mode.Load()
	allowed := false
	switch to {
	case modeNormal:
		allowed = from == modePreContact || from == modeClosed
	case modePreContact:
		allowed = from == modeNormal && !e.started
	case modeClosed:
		allowed = from == modeNormal || from == modePreContact
	case modeStopped:
		allowed = from != modeStopped
	}
	if allowed {
		e.mode.Store(to)
	}
	return allowed
}
