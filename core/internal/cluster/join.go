package cluster

// Joining: what a node does when it first hears its peers. The first frame
// ends the pre-contact share; a peer that has been up for a while tells
// this node that it joined a running cluster, whose buckets may be spent.
// A node that hears nobody older within two intervals is a founding member.
//
// Its two flags are under the engine's lock, held by the engine's tick and
// receive.
type joining struct {
	*engineEnv
	word joiningWord
	mode modeSwitch
	view bucketClock

	contacted bool // a peer's frame has arrived
	learned   bool // this node has settled newcomer or founder
}

// tick ends what no frame ended in time: nobody older showed up within two
// intervals (a founding member), and pre-contact ends after the isolation
// timeout.
func (j *joining) tick(now int64) {
	if !j.learned && now-j.startedAt > 2*j.interval {
		j.learned = true
	}
	if j.mode.get() == modePreContact && now-j.startedAt > j.isolation {
		j.mode.enter(modeNormal)
	}
}

// contact runs on every fresh frame, and reports whether this node has
// just learned that it joined a running cluster. The first one ends the
// pre-contact share; a peer that has been up for a while tells this node that it joined
// a running cluster, whose buckets may be spent: its own replica of the
// global bucket comes down to the level the peer reports (never below
// empty), instead of bringing a fresh full bucket. Its keyed replicas come
// down key by key, to the level in the first report of each
// (receiver.go, learnLevel): emptied here instead, they refused their keys
// for a window, and, once entries reported levels, dragged the peers'
// replicas of those keys down with them. A cluster that formed moments ago and is idle reports full
// buckets, so its first burst is not refused (before, a node that joined a
// second after the first emptied its bucket and refused a burst of B at
// the rate's pace).
func (j *joining) contact(now int64, peerInc uint64, level int64) (joined bool) {
	if !j.contacted {
		j.contacted = true
		if j.mode.get() == modePreContact {
			j.mode.enter(modeNormal)
		}
	}
	if j.learned || j.floor {
		return false
	}
	if peerInc+uint64(2*j.interval) < j.inc {
		j.learned = true
		j.log.Info("joined a running cluster: starting from its level", "node", j.name, "tokens", max(level, 0))
		b := j.view.bucketTime(now)
		j.word.lowerTo(j.rules.Default(), b, level)
		return true
	}
	return false
}
