package cluster

import (
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// The engine's request path: deciding clustered requests, counting admits
// for gossip (sender.go schedules the flushes that report them). It takes
// no lock: it reads and writes only the parts' lock-free fields.

// maxClockGap is how far a caller's time may be from the engine's clock on
// the clustered global bucket, whose word holds only the low bits of its
// time (counted_word.go). Further off, the request is denied and nothing is
// written: 13 days is no clock skew, only a caller's mistake.
const maxClockGap = int64(1) << 50

// farFromClock reports whether now is too far from the engine's clock for
// the counted word.
func (e *Engine) farFromClock(now int64) bool {
	return uint64(now-e.clockNow.Load()+maxClockGap) > uint64(2*maxClockGap)
}

// Allow spends one token of the global bucket, as Limiter.Allow does.
// waits reports a denial that is only a wait for the report: this node
// must wait for its peers to hear of its admits (overCap), not for tokens.
func (e *Engine) Allow(now int64) (ok bool, retry time.Duration, waits bool) {
	lz, rule := e.leases, e.rules.Default()
	if e.farFromClock(now) {
		return false, time.Second, false
	}
	if e.mode.get() == modeNormal {
		b := e.bucketTime(now)
		if lz != nil && lz.Hot(b) {
			ok, retry := lz.Allow(countedSource{e}, rule, b)
			switch {
			case ok:
				return true, 0, false
			case e.mode.get() == modeNormal:
				waits := e.word.unheard()+1 > rule.LocalCap.Load()
				e.fair.deniedDemand(1, waits)
				return false, retry, waits
			}
			// The limiter closed meanwhile: the standalone word decides.
			return e.allowSlow(now)
		}
		if ok, retry, count, fast, contended := e.word.allow(rule, b, &e.fair.share); fast {
			// Only the first unreported token and the threshold
			// schedule a flush: checked here, the common case makes
			// no call.
			if ok && (count == 1 || count == rule.FlushAt.Load()) {
				e.send.counted(count, 1, rule)
			}
			if contended && lz != nil {
				lz.Lost(b)
			}
			if ok {
				return true, 0, false
			}
			ok, retry = e.stealOr(b, retry, false)
			return ok, retry, false
		}
	}
	// Not normal, or past the cap of unreported tokens: the general path.
	return e.allowSlow(now)
}

// allowSlow is allow on the general path: every mode, the caps and the waits for the report.
func (e *Engine) allowSlow(now int64) (ok bool, retry time.Duration, waits bool) {
	var d render.Decision
	waits = e.takeCounted(&d, now, 1)
	if !d.Allowed {
		ok, retry = e.stealOr(e.bucketTime(now), d.RetryAfter, waits)
		return ok, retry, waits && !ok
	}
	return true, 0, false
}

// stealOr is the limiter's stealOr for a denied one-token request, at now
// on the buckets' clock, except that a node cut off under fail-closed
// spends no leased token; a denial is counted as offered load unless it
// only waits for the report (see fairShares.deniedDemand).
func (e *Engine) stealOr(at bucket.Time, retry time.Duration, waits bool) (bool, time.Duration) {
	if e.mode.get() != modeFailClosed {
		if ok, _ := e.leases.StealOr(at, retry); ok {
			return true, 0
		}
	}
	e.fair.deniedDemand(1, waits)
	return false, retry
}

// TakeGlobal decides n tokens of the global bucket into d, as Limiter.Take
// does, and reports a denial that is only a wait for the report (see allow).
func (e *Engine) TakeGlobal(d *render.Decision, now, n int64) (waits bool) {
	waits = e.takeCounted(d, now, n)
	if e.mode.get() != modeFailClosed {
		e.leases.StealInto(d, e.bucketTime(now), n)
	}
	if !d.Allowed {
		e.fair.deniedDemand(n, waits)
	}
	return waits && !d.Allowed
}

// takeCounted decides n tokens of the global bucket into d, and reports a
// wait for the report: a denial only because this node's peers must hear
// first. Once the limiter has closed and the counted word is handed back,
// the standalone word decides.
func (e *Engine) takeCounted(d *render.Decision, now, n int64) (waits bool) {
	c, rule := &e.word, e.rules.Default()
	pre := false
	if e.farFromClock(now) && e.mode.get() != modeStopped {
		*d = closedDecision(rule)
		return false
	}
	switch e.mode.get() {
	case modeFailClosed:
		*d = closedDecision(rule)
		return false
	case modePreContact:
		if !e.mode.spendPreContact(n) {
			*d = waitDecision(rule)
			return true
		}
		pre = true
	}
	if wait, capped := e.overCap(c.unheard(), rule, n); capped {
		if pre {
			e.mode.returnPreContact(n)
		}
		*d = wait
		return true
	}
	count, ok := c.take(d, rule, e.bucketTime(now), n, &e.fair.share)
	if !ok { // handed back: the limiter has closed
		bucket.TakeInto(d, e.standalone, rule, bucket.StandaloneTime(now), n)
		return false
	}
	if d.Allowed {
		e.send.counted(count, n, rule)
	} else if pre {
		e.mode.returnPreContact(n)
	}
	return false
}

// TakeKeyed decides n tokens of key hash h's bucket into d and counts an
// admit for gossip. It reports a wait for the report as takeGlobal does.
func (e *Engine) TakeKeyed(d *render.Decision, h uint64, rule *bucket.Rule, now, n int64) (waits bool) {
	if e.mode.get() == modeFailClosed {
		*d = closedDecision(rule)
		return false
	}
	at := e.bucketTime(now)
	for {
		ent := e.keys.Get(h, at)
		if ent == nil {
			// No room before the next flush clears some buckets' counts.
			*d = bucket.NoRoom(rule, e.tick)
			return false
		}
		if wait, capped := e.overCap(ent.pending.Load()+ent.inflight.Load(), rule, n); capped {
			*d = wait
			return true
		}
		k := ent.fair.Load()
		var ok bool
		if k != nil && k.share.on.Load() {
			ok = takeShared(d, &ent.tat, rule, at, n, &k.share)
		} else {
			ok = bucket.TakeInto(d, &ent.tat, rule, at, n)
		}
		if ok {
			if d.Allowed {
				e.countKeyed(h, ent, rule, n)
			} else if k != nil && e.mode.get() != modeStopped {
				e.send.refusedKeyed(h, ent, k, n)
			}
			return false
		}
		// The entry was evicted between lookup and take: look again.
	}
}

// RefundGlobal gives back n tokens of the global bucket: to the standalone
// word once the counted word is handed back. It reports false for a
// refund refused (refundable).
func (e *Engine) RefundGlobal(now, n int64) bool {
	applied, refused := e.word.refund(e.rules.Default(), e.bucketTime(now), n)
	if !applied {
		return bucket.Refund(e.standalone, e.rules.Default(), bucket.StandaloneTime(now), n)
	}
	return !refused
}

// RefundKeyed gives back n tokens of key hash h's bucket, taking them out
// of the count not yet sent. It reports false for a refund refused.
func (e *Engine) RefundKeyed(h uint64, rule *bucket.Rule, now, n int64) bool {
	ent := e.keys.Lookup(h)
	if ent == nil {
		return bucket.Refundable(rule, 0, n) // a full bucket: nothing to give back
	}
	if !bucket.Refund(&ent.tat, rule, e.bucketTime(now), n) {
		return false
	}
	unreport(&ent.pending, n)
	return true
}

// countedSource is a clustered limiter's global bucket as the source of
// leases: a lease's tokens are counted for gossip as they are handed out,
// within the node's cap of unreported tokens.
type countedSource struct{ e *Engine }

func (s countedSource) TakeUpTo(rule *bucket.Rule, at bucket.Time, n int64) (int64, time.Duration, bool) {
	e, c := s.e, &s.e.word
	room := rule.LocalCap.Load() - c.unheard()
	if room < 1 {
		e.send.kick()
		return 0, ReportRetry, false
	}
	got, count, retry, contended, ok := c.takeUpTo(rule, at, n, room, &e.fair.share)
	if !ok { // handed back: the limiter is closing
		return 0, time.Duration(minFlushGap), contended
	}
	if got > 0 {
		e.send.counted(count, got, rule)
	}
	return got, retry, contended
}

// giveBack returns a lease's tokens; if the limiter closed since they were
// taken, to the standalone word that holds the bucket now, whose clock is
// the limiter's: at plus the lag.
func (s countedSource) GiveBack(rule *bucket.Rule, at bucket.Time, n int64) {
	if applied, _ := s.e.word.refund(rule, at, n); !applied {
		_ = bucket.Refund(s.e.standalone, rule, bucket.StandaloneTime(int64(at)+s.e.view.lag.Load()), n)
	}
}

// overCap holds back a request that would push the admits this node's
// peers have not heard of yet (unheard) past its share of the bucket: the
// peers must hear first. Reports count as unheard for reportFlight after
// they are sent, so that when every node is hit at once (a flash crowd),
// each admits its share and then waits until the others' reports have
// arrived: by then its replica knows the bucket is spent. A lone node
// waits for nothing but its own report, a few milliseconds, and the
// real-clock forms of Allow and Take wait that out instead of refusing.
func (e *Engine) overCap(unheard int64, rule *bucket.Rule, n int64) (render.Decision, bool) {
	if unheard+n <= rule.LocalCap.Load() || e.mode.get() == modeStopped {
		return render.Decision{}, false
	}
	e.send.kick()
	return waitDecision(rule), true
}

// countKeyed counts an admit of key hash h for gossip, unless the limiter
// has closed.
func (e *Engine) countKeyed(h uint64, ent *clusterEntry, rule *bucket.Rule, n int64) {
	if e.mode.get() == modeStopped {
		return
	}
	e.send.countKeyed(h, ent, rule, n)
}

func closedDecision(rule *bucket.Rule) render.Decision {
	return render.Decision{BucketSize: rule.BucketSize, RetryAfter: time.Second, ResetAfter: time.Second, Window: rule.Window()}
}

// ReportRetry is how long a request that waits for the report (overCap, or the
// pre-contact share) waits before it is worth trying again: the next
// flush, and its flight to the peers.
const ReportRetry = time.Duration(minFlushGap + reportFlight)

func waitDecision(rule *bucket.Rule) render.Decision {
	return render.Decision{BucketSize: rule.BucketSize, RetryAfter: ReportRetry, ResetAfter: ReportRetry, Window: rule.Window()}
}
