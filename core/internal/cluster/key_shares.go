package cluster

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// Fair shares of a contended keyed bucket.
//
// A key asked at several replicas at once races as the global bucket does
// (fairness.go): every replica admits from its own copy, peers charge each
// admit a few milliseconds later, and a copy a fraction of a token fuller
// than the others takes the tokens first, for as long as the key stays
// contended. Such offsets are made when a full bucket turns contended: a
// replica charges a peer's first admits when they arrive, not when they
// were made, so it ends up emptier by the delivery time, and nothing
// after that brings the copies together. Measured in the simulator before
// these shares: one hot key at 5×R over 3 nodes kept offsets of 0.9 and
// 1.1 ms (a tenth of a token) for 20 s, and the nodes' admit ratios
// spread 0.83–1.25; three processes over memberlist spread 0.40–1.29.
//
// So a key that more than one node uses while one of them refuses it is
// hot: every frame's entry for it carries the tokens refused beside those
// admitted (its offered load), every node estimates its own and the
// cluster's offered load of the key, and while the key is contended a node
// admits below the gate (a quarter of the key's bucket) only what its
// share, R × (its load ÷ the cluster's), allows, as for the global bucket.
// Unlike the global bucket's shares, the loads are decaying totals per
// key, not a window per peer: a hot key costs one small record, however
// many nodes use it.
//
// A node refused only by itself (one client hammering one replica) is not
// hot, and sends nothing for its refusals: an attack on one replica costs
// its peers no traffic. Hot keys are at most maxHotKeys; one unused for
// hotFor is forgotten.
//
// A lying peer can claim any load, and so shrink this node's share, but a
// share only ever holds tokens back: the key's bucket still bounds every
// admit, and above the gate anyone may take tokens.
//
// keyShares owns the hot keys and their loads, under the engine's lock
// (held by the tick, the flush and receive); each keyShare's share bucket
// is lock-free (the request path takes from it), and so is the entry's
// pointer to it.
type keyShares struct {
	*engineEnv
	view      bucketClock
	hot       map[uint64]*keyShare
	tableFull atomic.Uint64 // keys not made hot because maxHotKeys were (Stats)
}

// keyShare is one hot key: its share bucket (lock-free) and, under the
// engine's lock, the loads that price it.
type keyShare struct {
	share   shareBucket
	refused atomic.Int64 // tokens refused here, not yet sent
	// own is this node's load of the key, all the cluster's (own
	// included): admitted and offered tokens, decaying totals.
	own, all keyLoad
	// refusedAt is when the key was last refused anywhere, peerAt when a
	// peer last reported using it.
	refusedAt, peerAt int64
}

const (
	// maxHotKeys bounds the keys with shares: a peer that reports
	// invented keys fills the table, and beyond it keys race.
	maxHotKeys = 4096
	// hotFor is how long a hot key stays hot after its last refusal.
	hotFor = 4 * fairWindow
)

// keyLoad is a key's admitted and offered tokens, each a total that decays
// with a time constant of fairWindow: the ratio of two such totals taken
// at the same time is the ratio of recent rates.
type keyLoad struct {
	admits, demand float64
	at             int64
}

// add decays the totals to now and adds admits and demand (offered) tokens.
func (k *keyLoad) add(admits, demand int64, now int64) {
	k.decay(now)
	k.admits += float64(admits)
	k.demand += float64(demand)
}

func (k *keyLoad) decay(now int64) {
	if now > k.at {
		f := math.Exp(-float64(now-k.at) / float64(fairWindow))
		k.admits, k.demand, k.at = k.admits*f, k.demand*f, now
	}
}

func newKeyShares(env *engineEnv, view *peerView) keyShares {
	return keyShares{engineEnv: env, view: view, hot: make(map[uint64]*keyShare)}
}

// reportable reports whether a flush should send key hash h's refusals
// when it admitted none of it since the last: only for a hot key that a
// peer uses too. The caller holds the engine's lock.
func (ks *keyShares) reportable(h uint64, now int64) bool {
	k := ks.hot[h]
	return k != nil && now-k.peerAt < fairWindow
}

// sent notes what this node reports of key hash h: admitted and refused
// tokens. A refusal makes the key hot only once a peer uses it too
// (heard). The caller holds the engine's lock.
func (ks *keyShares) sent(h uint64, admitted, refused, now int64) {
	k := ks.hot[h]
	if k == nil {
		return
	}
	k.own.add(admitted, admitted+refused, now)
	k.all.add(admitted, admitted+refused, now)
	if refused > 0 {
		k.refusedAt = now
	}
}

// heard notes a peer's report of key hash h, whose entry here is ent (nil
// when this node holds none). The key turns hot when a peer uses it while
// this node's copy holds less than a token: the key is contended, and this
// node may be asked for it too. The caller holds the engine's lock.
func (ks *keyShares) heard(h uint64, ent *clusterEntry, admitted, refused, now int64) {
	k := ks.hot[h]
	if k == nil {
		if ent == nil {
			return
		}
		rule := ks.rules.ForKey(h)
		if bucket.Level(&ent.tat, rule, ks.view.bucketTime(now)) >= rule.Interval {
			return // a token left: not contended here
		}
		if len(ks.hot) >= maxHotKeys {
			ks.tableFull.Add(1)
			return
		}
		k = &keyShare{refusedAt: now} // as good as refused: no token left
		k.share.init(0)
		ks.hot[h] = k
	}
	k.all.add(admitted, admitted+refused, now)
	k.peerAt = now
	if refused > 0 {
		k.refusedAt = now
	}
}

// addRefused counts n tokens refused here for want of tokens, and
// returns the count not yet sent; takeRefused hands it to a flush.
// Lock-free: the request path and the sender call them.
func (k *keyShare) addRefused(n int64) int64 { return k.refused.Add(n) }
func (k *keyShare) takeRefused() int64       { return k.refused.Swap(0) }

// rebalance runs on every tick: it prices every hot key's share from the
// loads, attaches it to the key's entry (a new entry after an eviction
// has none), and forgets the keys no longer refused. The caller holds the
// engine's lock.
func (ks *keyShares) rebalance(now int64) {
	at := ks.view.bucketTime(now)
	for h, k := range ks.hot {
		ent := ks.keys.Lookup(h)
		if now-k.refusedAt > hotFor || ent == nil && now-k.peerAt > fairWindow {
			if ent != nil {
				ent.dropShare(k)
			}
			delete(ks.hot, h)
			continue
		}
		k.price(ks.rules.ForKey(h), ent, now, at, ks.tick)
		if ent != nil {
			ent.attachShare(k)
		}
	}
}

// price sets the share of key k with rule, whose replica is ent's
// bucket, as fairShares.rebalance does for the global bucket: off unless
// the key is contended (the cluster admits under contendedRatio of what
// it is offered) and this node is offered some of it.
func (k *keyShare) price(rule *bucket.Rule, ent *clusterEntry, now int64, at bucket.Time, tick int64) {
	q := &k.share
	k.own.decay(now)
	k.all.decay(now)
	own, all := k.own.demand, k.all.demand
	if own <= 0 || all <= 0 || k.all.admits >= contendedRatio*all {
		q.turn(false)
		return
	}
	q.setGate(rule)
	share := rule.PerSecond() * min(own/all, 1)
	if ent != nil {
		// Stock above empty raises the share, so that tokens the shares
		// leave unspent drain instead of idling (fairness.go).
		if level := bucket.Level(&ent.tat, rule, at); level > 0 {
			share *= 1 + drainGain*float64(level)/float64(q.gate.Load())
		}
	}
	iv := saturate(math.Ceil(float64(time.Second)/share), 1, maxShareInterval)
	if iv > rule.Tolerance {
		q.turn(false)
		return
	}
	// A hot key's record stays small: it measures no pauses (only the
	// counted word notes asks).
	tol := shareTolerance(share, iv, tick, 0)
	q.set(iv, tol, at)
	q.turn(true)
}

// takeShared is bucket.TakeInto for a hot key's bucket: an admit that leaves the
// replica below the gate while the key is contended also spends this
// node's share q. ok is false when the word was evicted.
func takeShared(d *render.Decision, tat *atomic.Int64, rule *bucket.Rule, at bucket.Time, n int64, q *shareBucket) (ok bool) {
	now := int64(at)
	unit := rule.Interval
	cost := n * unit
	held := false
	old := tat.Load()
	for {
		if old == bucket.Evicted {
			if held {
				q.giveBack(n, now)
			}
			return false
		}
		base := max(old, now)
		next := base + cost
		if next-now > rule.Tolerance {
			if held {
				q.giveBack(n, now)
			}
			rule.FillDenied(d, base, now, next, unit)
			bucket.Settle(tat, rule, old, at)
			return true
		}
		if !held && q.needed(next-now, rule.Tolerance) {
			if ok, wait := q.take(n, now); !ok {
				rule.FillDenied(d, base, now, next, unit)
				d.RetryAfter = max(d.RetryAfter, wait)
				return true
			}
			held = true
		}
		if tat.CompareAndSwap(old, next) {
			rule.FillAllowed(d, next, now, unit)
			return true
		}
		old = bucket.Reread(tat)
	}
}
