package gopherpace

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// leases take the contention out of a hot global bucket. Every admit must
// write the bucket's one word, so when several cores call Allow at once
// they trade that cache line on every call. While the bucket is hot, each
// processor instead takes a small batch of tokens from the word at once (a
// lease) and spends it from a slot that stays in its own cache.
//
// Leased tokens have left the bucket, and a lease expires leaseLife after
// it was taken, so in any span t a leasing bucket admits at most
// B + R·(t + leaseLife): as if the span were 1 ms longer. Expired tokens
// are dropped, never returned: the bucket may have refilled to full since,
// and returning them would overfill it. So a hot bucket that goes quiet
// for over 1 ms loses what its leases held, at most 1/leaseShare of it.
//
// Leases never strand tokens while they are fresh: a one-token request that
// the bucket denies spends a token from any processor's lease instead, so
// many goroutines at one instant still admit exactly one bucket between
// them. (A Take of several tokens does not gather them from leases.)
//
// Only the global bucket leases, and only when a batch can stay a small
// part of the bucket (see newLeases). A clustered limiter's leases come out
// of its counted word, so their tokens are reported to peers as admitted
// when they are leased, within the node's cap of unreported tokens; a node
// cut off under fail-closed spends none. A bucket is hot for
// hotWindow after two compare-and-swaps on its word have lost races within
// a millisecond (one alone may be the engine's flush, at most one a
// millisecond); an uncontended bucket never leases and pays one extra load
// for the check.
type leases struct {
	hotUntil atomic.Int64 // read on every Allow, written at most every hotWindow/10
	_        [56]byte
	size     int64 // tokens per lease
	// lastLost is when a compare-and-swap on the word last lost a race.
	lastLost atomic.Int64
	slots    []leaseSlot
	next     atomic.Uint32
	// pool hands each processor its slot: sync.Pool keeps a per-processor
	// cache, and is the standard library's only one. A slot the pool drops
	// keeps its tokens, because slots live here, not in the pool.
	pool sync.Pool
}

// leaseSlot is one processor's lease: the time it was taken in the high
// bits (read back relative to now, as in countedWord) and the tokens left
// in the low leaseBits.
type leaseSlot struct {
	word atomic.Uint64
	_    [56]byte
}

const (
	hotWindow = int64(10 * time.Millisecond)
	// maxLease caps a batch: refilling a lease once every 64 admits already
	// makes the shared word's traffic negligible.
	maxLease = 64
	// leaseShare keeps all leases together within 1/32 of the bucket.
	leaseShare   = 32
	slotsPerProc = 4
	leaseBits    = 8
	leaseMask    = 1<<leaseBits - 1
	leaseLife    = int64(time.Millisecond)
)

func packLease(at, tokens int64) uint64 { return uint64(at)<<leaseBits | uint64(tokens) }

// fresh reports whether a lease word was taken within leaseLife of now,
// either way: a lease from a time far from now (a caller's clock jumped)
// is never spent.
func fresh(w uint64, at bucketTime) bool {
	now := int64(at)
	return uint64(int64(w-uint64(now)<<leaseBits)>>leaseBits+leaseLife) <= uint64(2*leaseLife)
}

// newLeases returns the leases for a bucket of rule, or nil when a batch
// would be under 2 tokens.
func newLeases(rule *rule) *leases { return newLeasesFor(rule, runtime.GOMAXPROCS(0)) }

func newLeasesFor(rule *rule, procs int) *leases {
	slots := slotsPerProc * procs
	size := min(maxLease, rule.bucketSize/int64(leaseShare*slots))
	if size < 2 {
		return nil
	}
	lz := &leases{size: size, slots: make([]leaseSlot, slots)}
	// Cold at any time a caller may pass, even one before the limiter was
	// created (0 would make those hot).
	lz.hotUntil.Store(neverUsed)
	lz.lastLost.Store(neverUsed)
	lz.pool.New = func() any { return lz.another() }
	return lz
}

// another hands out the slots in turn. The pool can end up giving one slot
// to two processors (a goroutine may put its slot back on another
// processor); a processor that finds its slot contended takes another, and
// with more slots than processors the collisions die out.
func (lz *leases) another() *leaseSlot {
	return &lz.slots[lz.next.Add(1)%uint32(len(lz.slots))]
}

// hot reports whether the bucket is hot at now: within hotWindow before
// the end of its last heating (a heating far from now, from a caller's
// clock that jumped, does not count).
func (lz *leases) hot(at bucketTime) bool {
	return uint64(lz.hotUntil.Load()-int64(at)-1) < uint64(hotWindow)
}

// lost records a compare-and-swap on the word that lost a race, and heats
// the bucket if another did within a millisecond.
func (lz *leases) lost(at bucketTime) {
	now := int64(at)
	if now-lz.lastLost.Swap(now) < int64(time.Millisecond) {
		lz.heat(at)
	}
}

// heat marks the bucket contended as of now.
func (lz *leases) heat(at bucketTime) {
	now := int64(at)
	if until := now + hotWindow; until-lz.hotUntil.Load() > hotWindow/10 {
		lz.hotUntil.Store(until)
	}
}

// leaseSource is the bucket that leases draw from: the standalone word, or
// a clustered limiter's counted word, which counts a lease's tokens for
// gossip as it hands them out.
type leaseSource interface {
	// takeUpTo spends as many tokens as the bucket allows, up to n, in one
	// compare-and-swap; on a denial (got 0) retry is the wait.
	takeUpTo(rule *rule, at bucketTime, n int64) (got int64, retry time.Duration, contended bool)
	// giveBack returns n tokens taken at this very instant.
	giveBack(rule *rule, at bucketTime, n int64)
}

// plainSource is a standalone limiter's global word.
type plainSource struct{ tat *atomic.Int64 }

func (s plainSource) takeUpTo(rule *rule, at bucketTime, n int64) (int64, time.Duration, bool) {
	return takeUpTo(s.tat, rule, at, n)
}

func (s plainSource) giveBack(rule *rule, at bucketTime, n int64) { _ = refund(s.tat, rule, at, n) }

// allow spends one token from this processor's lease, taking a new lease
// from src when it runs dry or expires.
func (lz *leases) allow(src leaseSource, rule *rule, at bucketTime) (bool, time.Duration) {
	now := int64(at)
	s := lz.pool.Get().(*leaseSlot)
	ok, contended := s.spend(at)
	if contended {
		s = lz.another()
	}
	if ok {
		lz.pool.Put(s)
		return true, 0
	}
	got, retry, contended := src.takeUpTo(rule, at, lz.size)
	if contended {
		lz.heat(at)
	}
	if got > 0 {
		// Another processor may have filled the slot meanwhile (the pool
		// can hand one slot to two); then this lease, taken at this very
		// instant, goes straight back.
		if w := s.word.Load(); w&leaseMask != 0 && fresh(w, at) || !s.word.CompareAndSwap(w, packLease(now, got-1)) {
			src.giveBack(rule, at, got-1)
		}
		lz.pool.Put(s)
		return true, 0
	}
	lz.pool.Put(s)
	if lz.steal(at) {
		return true, 0
	}
	return false, retry
}

// spend takes one token from a fresh lease. contended reports that another
// goroutine spent from the slot at the same moment.
func (s *leaseSlot) spend(at bucketTime) (ok, contended bool) {
	for {
		w := s.word.Load()
		if w&leaseMask == 0 || !fresh(w, at) {
			return false, contended
		}
		if s.word.CompareAndSwap(w, w-1) {
			return true, contended
		}
		contended = true
	}
}

// steal spends one token from any processor's fresh lease, for a request
// that the bucket's word denied.
func (lz *leases) steal(at bucketTime) bool {
	for i := range lz.slots {
		if ok, _ := lz.slots[i].spend(at); ok {
			return true
		}
	}
	return false
}

// leased is the count of tokens held in fresh leases at now.
func (lz *leases) leased(at bucketTime) int64 {
	var n int64
	for i := range lz.slots {
		if w := lz.slots[i].word.Load(); fresh(w, at) {
			n += int64(w & leaseMask)
		}
	}
	return n
}
