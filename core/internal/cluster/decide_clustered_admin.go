package cluster

import (
	"fmt"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

// The rest of the clustered decider (core's decider.go): reading, resetting and
// repricing the replicas, the engine's part of Stats, and its peers.

func (e *Engine) PeekGlobal(now int64) (tat int64, at bucket.Time, leased int64) {
	at = e.bucketTime(now)
	if t, ok := e.word.tat(e.rules.Default(), at); ok {
		return t, at, 0
	}
	// Handed back: the limiter has closed and the standalone word holds
	// the bucket, on the limiter's clock.
	return e.standalone.Load(), bucket.StandaloneTime(now), 0
}

func (e *Engine) PeekKeyed(h uint64, now int64) (tat int64, at bucket.Time) {
	tat, at = bucket.NeverUsed, e.bucketTime(now)
	if ent := e.keys.Lookup(h); ent != nil {
		if t := ent.tat.Load(); t != bucket.Evicted {
			tat = t
		}
	}
	return tat, at
}

// ResetGlobal refills this node's replica of the global bucket (the
// standalone word, once handed back). Admits not yet reported stay
// reported.
func (e *Engine) ResetGlobal(now int64) {
	if !e.word.reset(e.rules.Default(), e.bucketTime(now)) {
		bucket.Refill(e.standalone)
	}
}

func (e *Engine) ResetKeyed(h uint64) {
	if ent := e.keys.Lookup(h); ent != nil {
		bucket.Refill(&ent.tat)
	}
}

func (e *Engine) ChangeTime() int64 { return e.now() }

// AdmitRule bounds a clustered rule's refill time (a counted word
// holds only so many bits of time), lets peers' charges carry its buckets
// a window into debt, and sizes its caps for the cluster.
func (e *Engine) AdmitRule(rule *bucket.Rule) error {
	if rule.Tolerance > MaxTolerance {
		return fmt.Errorf("a bucket of %d at %d per %v takes %s to refill, over the %s a clustered limiter allows: lower the bucket size or raise the rate",
			rule.BucketSize, rule.Tokens, rule.Per, bucket.LongDuration(rule.Tolerance), bucket.LongDuration(MaxTolerance))
	}
	bucket.ClusteredReach(rule, e.floor)
	e.resize(rule)
	return nil
}

func (e *Engine) Reprice(now int64, pick func(h uint64, global bool) (from, to *bucket.Rule)) {
	at := e.bucketTime(now)
	if from, to := pick(0, true); from != nil {
		e.fair.share.setGate(to)
		e.word.reprice(from, to, at)
	}
	e.keys.Each(func(h uint64, ent *clusterEntry) {
		if from, to := pick(h, false); from != nil {
			bucket.Reprice(&ent.tat, from, to, at)
		}
	})
}

func (e *Engine) RepriceKey(now int64, h uint64, from, to *bucket.Rule) {
	if ent := e.keys.Lookup(h); ent != nil {
		bucket.Reprice(&ent.tat, from, to, e.bucketTime(now))
	}
}

// Peers lists the other nodes this limiter knows, by name.
func (e *Engine) Peers() []PeerState {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.view.list(e.now())
}
