package gopherpace

import (
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/cluster"
)

// A limiter decides in one of two ways, chosen once, in New: on buckets of
// its own (standalone, below), or on the engine's replicas, counting every
// admit for gossip (clustered: the engine, internal/cluster). The
// decider is that choice, and this file is the one place that acts on it:
// every entry point (Allow, Take, their ...At forms, Wait, Limits, Peek,
// Reset, Refund, SetRate, SetOverride, Stats, Peers, Close) reaches the
// buckets through the limiter's decider and never asks which it is.
//
// It is a concrete type behind one branch, not an interface: a Decision
// passed through an interface method escapes to the heap, and the request
// path allocates nothing.
//
// Close changes no decider. A clustered limiter's global bucket moves to
// the standalone word inside the counted word itself (countedWord.
// handBack), in the same atomic step that ends the counted word, so that
// a decision in flight can neither be lost nor made twice, whichever side
// of the step it lands on; the engine then decides the global bucket on
// that word, and its keyed replicas without counting, as a standalone
// limiter would. (A decider swapped in the Limiter would still need that
// step for the decisions that had loaded the old one.)
//
// Times: every now a decider is given is the caller's, in nanoseconds
// since the limiter's epoch. A clustered decider converts it once, into a
// variable of its own, to the buckets' clock (engine.bucketTime); the tat
// and at a peek returns are on the buckets' clock.
type decider struct {
	eng  *cluster.Engine // clustered; nil when standalone
	solo *standalone     // the limiter's own buckets; decides when eng is nil
}

// standalone and cluster choose how the limiter decides, in New: its own
// buckets, and then, when clustered, the engine.
func (d *decider) standalone(solo *standalone) { d.solo = solo }
func (d *decider) cluster(eng *cluster.Engine) { d.eng = eng }

// allow spends one token of the global bucket, stealing a leased token on
// a denial; waits reports a denial that only waits for this node's report
// (see Allow).
func (d *decider) allow(now int64) (ok bool, retry time.Duration, waits bool) {
	if d.eng != nil {
		return d.eng.Allow(now)
	}
	return d.solo.allow(now)
}

// takeGlobal and takeKeyed decide n tokens into dec, as allow does.
func (d *decider) takeGlobal(dec *Decision, now, n int64) (waits bool) {
	if d.eng != nil {
		return d.eng.TakeGlobal(dec.raw(), now, n)
	}
	return d.solo.takeGlobal(dec, now, n)
}

func (d *decider) takeKeyed(dec *Decision, h uint64, rule *bucket.Rule, now, n int64) (waits bool) {
	if d.eng != nil {
		return d.eng.TakeKeyed(dec.raw(), h, rule, now, n)
	}
	return d.solo.takeKeyed(dec, h, rule, now, n)
}

// refundGlobal and refundKeyed give tokens back, and report false for a
// refund refused because the bucket cannot have spent them (refundable).
func (d *decider) refundGlobal(now, n int64) bool {
	if d.eng != nil {
		return d.eng.RefundGlobal(now, n)
	}
	return d.solo.refundGlobal(now, n)
}

func (d *decider) refundKeyed(h uint64, rule *bucket.Rule, now, n int64) bool {
	if d.eng != nil {
		return d.eng.RefundKeyed(h, rule, now, n)
	}
	return d.solo.refundKeyed(h, rule, now, n)
}

// peekGlobal and peekKeyed read a bucket without spending: its theoretical
// arrival time (bucket.NeverUsed for a bucket not held) and now on the buckets'
// clock; leased is what leases hold of the global bucket besides.
func (d *decider) peekGlobal(now int64) (tat int64, at bucket.Time, leased int64) {
	if d.eng != nil {
		return d.eng.PeekGlobal(now)
	}
	return d.solo.peekGlobal(now)
}

func (d *decider) peekKeyed(h uint64, now int64) (tat int64, at bucket.Time) {
	if d.eng != nil {
		return d.eng.PeekKeyed(h, now)
	}
	return d.solo.peekKeyed(h, now)
}

func (d *decider) resetGlobal(now int64) {
	if d.eng != nil {
		d.eng.ResetGlobal(now)
		return
	}
	d.solo.resetGlobal(now)
}

func (d *decider) resetKeyed(h uint64) {
	if d.eng != nil {
		d.eng.ResetKeyed(h)
		return
	}
	d.solo.resetKeyed(h)
}

// changeTime is the time a change of rule reprices the buckets at: the
// engine's clock when clustered (a simulated network has its own).
func (d *decider) changeTime() int64 {
	if d.eng != nil {
		return d.eng.ChangeTime()
	}
	return d.solo.changeTime()
}

// admitRule checks a rule built while running (SetRate, SetOverride)
// and fits it to the decider: a clustered limiter bounds its refill time
// and sizes its caps for the cluster.
func (d *decider) admitRule(rule *bucket.Rule) error {
	if d.eng != nil {
		return d.eng.AdmitRule(rule)
	}
	return nil
}

// reprice reprices every bucket whose rule change pick reports (from,
// to; nil: unchanged): the global bucket (key hash 0, global true) and
// every live keyed bucket.
func (d *decider) reprice(now int64, pick func(h uint64, global bool) (from, to *bucket.Rule)) {
	if d.eng != nil {
		d.eng.Reprice(now, pick)
		return
	}
	d.solo.reprice(now, pick)
}

// repriceKey reprices key hash h's live bucket from one rule to another.
func (d *decider) repriceKey(now int64, h uint64, from, to *bucket.Rule) {
	if d.eng != nil {
		d.eng.RepriceKey(now, h, from, to)
		return
	}
	d.solo.repriceKey(now, h, from, to)
}

// fillStats writes the decider's part of s, and returns the time and the
// global bucket's TAT it read them at.
func (d *decider) fillStats(s *Stats, now int64) (at bucket.Time, tat int64) {
	if d.eng != nil {
		return d.eng.FillStats((*cluster.Stats)(s), now)
	}
	return d.solo.fillStats(s, now)
}

// peers are the other nodes, for status pages; nil standalone.
func (d *decider) peers() []Peer {
	if d.eng == nil {
		return nil
	}
	states := d.eng.Peers()
	out := make([]Peer, len(states))
	for i, p := range states {
		out[i] = Peer(p)
	}
	return out
}

// close stops a clustered limiter's gossip, saying goodbye.
func (d *decider) close() {
	if d.eng != nil {
		d.eng.Stop()
	}
}

// standalone decides on the limiter's own buckets: the global word, its
// leases, and the keyed store.
type standalone Limiter

func (s *standalone) allow(now int64) (bool, time.Duration, bool) {
	lz, rule, at := s.leases, s.rules.Default(), bucket.StandaloneTime(now)
	// The global bucket is never evicted, so the lean path applies.
	if lz == nil {
		ok, retry, _ := bucket.Allow(&s.global.TAT, rule, at, 1)
		return ok, retry, false
	}
	if lz.Hot(at) {
		ok, retry := lz.Allow(bucket.PlainSource{TAT: &s.global.TAT}, rule, at)
		return ok, retry, false
	}
	ok, retry, contended := bucket.Allow(&s.global.TAT, rule, at, 1)
	if contended {
		lz.Lost(at)
	}
	if !ok {
		ok, retry = lz.StealOr(at, retry)
	}
	return ok, retry, false
}

func (s *standalone) takeGlobal(d *Decision, now, n int64) bool {
	at := bucket.StandaloneTime(now)
	bucket.TakeInto(d.raw(), &s.global.TAT, s.rules.Default(), at, n)
	s.leases.StealInto(d.raw(), at, n)
	return false
}

func (s *standalone) takeKeyed(d *Decision, h uint64, rule *bucket.Rule, now, n int64) bool {
	s.keys.Take(d.raw(), h, rule, bucket.StandaloneTime(now), n)
	return false
}

func (s *standalone) refundGlobal(now, n int64) bool {
	return bucket.Refund(&s.global.TAT, s.rules.Default(), bucket.StandaloneTime(now), n)
}

func (s *standalone) refundKeyed(h uint64, rule *bucket.Rule, now, n int64) bool {
	ok := bucket.Refundable(rule, 0, n) // a key with no bucket is full
	s.keys.With(h, func(e *bucket.PlainEntry) { ok = bucket.Refund(&e.TAT, rule, bucket.StandaloneTime(now), n) })
	return ok
}

func (s *standalone) peekGlobal(now int64) (tat int64, at bucket.Time, leased int64) {
	if s.leases != nil {
		leased = s.leases.Leased(bucket.StandaloneTime(now))
	}
	return s.global.TAT.Load(), bucket.StandaloneTime(now), leased
}

func (s *standalone) peekKeyed(h uint64, now int64) (tat int64, at bucket.Time) {
	tat = bucket.NeverUsed
	s.keys.With(h, func(e *bucket.PlainEntry) { tat = e.TAT.Load() })
	return tat, bucket.StandaloneTime(now)
}

func (s *standalone) resetGlobal(int64) { bucket.Refill(&s.global.TAT) }

func (s *standalone) resetKeyed(h uint64) {
	s.keys.With(h, func(e *bucket.PlainEntry) { bucket.Refill(&e.TAT) })
}

func (s *standalone) changeTime() int64 { return int64(time.Since(s.epoch)) }

func (s *standalone) reprice(now int64, pick func(h uint64, global bool) (from, to *bucket.Rule)) {
	at := bucket.StandaloneTime(now)
	if from, to := pick(0, true); from != nil {
		bucket.Reprice(&s.global.TAT, from, to, at)
	}
	s.keys.Each(func(h uint64, e *bucket.PlainEntry) {
		if from, to := pick(h, false); from != nil {
			bucket.Reprice(&e.TAT, from, to, at)
		}
	})
}

func (s *standalone) repriceKey(now int64, h uint64, from, to *bucket.Rule) {
	s.keys.With(h, func(e *bucket.PlainEntry) { bucket.Reprice(&e.TAT, from, to, bucket.StandaloneTime(now)) })
}

func (s *standalone) fillStats(st *Stats, now int64) (at bucket.Time, tat int64) {
	at = bucket.StandaloneTime(now)
	st.LiveKeys, st.KeysEvicted = s.keys.LiveAt(at), s.keys.EvictedCount()
	return at, s.global.TAT.Load()
}
