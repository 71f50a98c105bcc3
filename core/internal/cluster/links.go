package cluster

import "github.com/pedreviljoen/gopherpace/core/internal/bucket"

// What each part needs of the others. A part holds no pointer to another
// part, only one of these interfaces, so the methods below are the whole
// of its dependence on the other (New wires the concrete parts; a test may
// wire a double). The request path reaches the parts through the engine's
// own fields, not through these.

// bucketClock is the buckets' clock (peerView): the engine's time less the
// lag of peers out of sight.
type bucketClock interface {
	bucketTime(now int64) bucket.Time
}

// modeSwitch is the mode the request path obeys (modeState).
type modeSwitch interface {
	get() int32
	enter(to int32) bool
}

// The sender's: the counts to report, the load and level a frame carries,
// the hot keys' refusals, and the view's idleness and arrivals.
type (
	reportedWord interface {
		addInflight(n int64)
		drain(rule *bucket.Rule, at bucket.Time) int64
	}
	reportedLoad interface {
		demandTotal(reported uint64) uint64
		levelTokens(now int64) int64
		slicing() bool
	}
	reportedHotKeys interface {
		reportable(h uint64, now int64) bool
		sent(h uint64, admitted, refused, now int64)
	}
	senderView interface {
		bucketClock
		awake(now int64)
		idle()
		takeArrival() bool
		withheldShare() float64
		partial() bool
	}
)

// The receiver's: what it charges, whom it heard, and who learns of it.
type (
	chargedWord interface {
		debit(rule *bucket.Rule, at bucket.Time, n, maxDebt int64)
	}
	receiverView interface {
		bucketClock
		peer(name string) *peer
		member(name string, now int64) *peer
		stream(p *peer, inc uint64) *stream
		heard(p *peer, s *stream, now int64, leaving, idle, news, relayed bool, withheld float64) (wasVisible bool)
		takePredicted(p *peer) float64
	}
	loadObserver interface {
		observe(ps *peerShare, level, now int64, at bucket.Time)
	}
	contactNoter interface {
		contact(now int64, peerInc uint64, level int64) (joined bool)
	}
	hotKeyHearer interface {
		heard(h uint64, ent *clusterEntry, admitted, refused, now int64)
	}
)

// The shares': the word they measure and resync, and the peers in sight.
type (
	sharedWord interface {
		debit(rule *bucket.Rule, at bucket.Time, n, maxDebt int64)
		pending() int64
		tat(rule *bucket.Rule, at bucket.Time) (int64, bool)
	}
	sharesView interface {
		bucketClock
		activeInSight(now int64, f func(*stream))
		eachStream(f func(*stream))
		unheard(now int64) int
		knownNodes() int64
		caughtUpLag() int64
	}
)

// joiningWord is the word joining lowers to a running cluster's level.
type joiningWord interface {
	lowerTo(rule *bucket.Rule, at bucket.Time, level int64)
}
