package bucket

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// Leases take the contention out of a hot global bucket. Every admit must
// write the bucket's one word, so when several cores call Allow at once
// they trade that cache line on every call. While the bucket is hot, each
// processor instead takes a small batch of tokens from the word at once (a
// lease) and spends it from a slot that stays in its own cache.
//
// Leased tokens have left the bucket, and a lease expires LeaseLife after
// it was taken, so in any span t a leasing bucket admits at most
// B + R·(t + LeaseLife): as if the span were 1 ms longer. Expired tokens
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
// part of the bucket (see NewLeases). A clustered limiter's leases come out
// of its counted word, so their tokens are reported to peers as admitted
// when they are leased, within the node's cap of unreported tokens; a node
// cut off under fail-closed spends none. A bucket is hot for
// HotWindow after two compare-and-swaps on its word have lost races within
// a millisecond (one alone may be the engine's flush, at most one a
// millisecond); an uncontended bucket never leases and pays one extra load
// for the check.
type Leases struct {
	HotUntil atomic.Int64 // read on every Allow, written at most every HotWindow/10
	_        [56]byte
	size     int64 // tokens per lease
	// lastLost is when a compare-and-swap on the word last lost a race.
	lastLost atomic.Int64
	Slots    []LeaseSlot
	next     atomic.Uint32
	// Pool hands each processor its slot: sync.Pool keeps a per-processor
	// cache, and is the standard library's only one. A slot the pool drops
	// keeps its tokens, because slots live here, not in the pool.
	Pool sync.Pool
}

// LeaseSlot is one processor's lease: the time it was taken in the high
// bits (read back relative to now, as in countedWord) and the tokens left
// in the low leaseBits.
type LeaseSlot struct {
	Word atomic.Uint64
	_    [56]byte
}

const (
	HotWindow = int64(10 * time.Millisecond)
	// maxLease caps a batch: refilling a lease once every 64 admits already
	// makes the shared word's traffic negligible.
	maxLease = 64
	// leaseShare keeps all leases together within 1/32 of the bucket.
	leaseShare   = 32
	slotsPerProc = 4
	leaseBits    = 8
	leaseMask    = 1<<leaseBits - 1
	LeaseLife    = int64(time.Millisecond)
)

func PackLease(at, tokens int64) uint64 { return uint64(at)<<leaseBits | uint64(tokens) }

// fresh reports whether a lease word was taken within LeaseLife of now,
// either way: a lease from a time far from now (a caller's clock jumped)
// is never spent.
func fresh(w uint64, at Time) bool {
	now := int64(at)
	return uint64(int64(w-uint64(now)<<leaseBits)>>leaseBits+LeaseLife) <= uint64(2*LeaseLife)
}

// NewLeases returns the leases for a bucket of rule, or nil when a batch
// would be under 2 tokens.
func NewLeases(rule *Rule) *Leases { return NewLeasesFor(rule, runtime.GOMAXPROCS(0)) }

func NewLeasesFor(rule *Rule, procs int) *Leases {
	slots := slotsPerProc * procs
	size := min(maxLease, rule.BucketSize/int64(leaseShare*slots))
	if size < 2 {
		return nil
	}
	lz := &Leases{size: size, Slots: make([]LeaseSlot, slots)}
	// Cold at any time a caller may pass, even one before the limiter was
	// created (0 would make those hot).
	lz.HotUntil.Store(NeverUsed)
	lz.lastLost.Store(NeverUsed)
	lz.Pool.New = func() any { return lz.another() }
	return lz
}

// another hands out the slots in turn. The pool can end up giving one slot
// to two processors (a goroutine may put its slot back on another
// processor); a processor that finds its slot contended takes another, and
// with more slots than processors the collisions die out.
func (lz *Leases) another() *LeaseSlot {
	return &lz.Slots[lz.next.Add(1)%uint32(len(lz.Slots))]
}

// Hot reports whether the bucket is hot at now: within HotWindow before
// the end of its last heating (a heating far from now, from a caller's
// clock that jumped, does not count).
func (lz *Leases) Hot(at Time) bool {
	return uint64(lz.HotUntil.Load()-int64(at)-1) < uint64(HotWindow)
}

// Lost records a compare-and-swap on the word that lost a race, and heats
// the bucket if another did within a millisecond.
func (lz *Leases) Lost(at Time) {
	now := int64(at)
	if now-lz.lastLost.Swap(now) < int64(time.Millisecond) {
		lz.Heat(at)
	}
}

// Heat marks the bucket contended as of now.
func (lz *Leases) Heat(at Time) {
	now := int64(at)
	if until := now + HotWindow; until-lz.HotUntil.Load() > HotWindow/10 {
		lz.HotUntil.Store(until)
	}
}

// LeaseSource is the bucket that leases draw from: the standalone word, or
// a clustered limiter's counted word, which counts a lease's tokens for
// gossip as it hands them out.
type LeaseSource interface {
	// TakeUpTo spends as many tokens as the bucket allows, up to n, in one
	// compare-and-swap; on a denial (got 0) retry is the wait.
	TakeUpTo(rule *Rule, at Time, n int64) (got int64, retry time.Duration, contended bool)
	// GiveBack returns n tokens taken at this very instant.
	GiveBack(rule *Rule, at Time, n int64)
}

// PlainSource is a standalone limiter's global word.
type PlainSource struct{ TAT *atomic.Int64 }

func (s PlainSource) TakeUpTo(rule *Rule, at Time, n int64) (int64, time.Duration, bool) {
	return takeUpTo(s.TAT, rule, at, n)
}

func (s PlainSource) GiveBack(rule *Rule, at Time, n int64) { _ = Refund(s.TAT, rule, at, n) }

// Allow spends one token from this processor's lease, taking a new lease
// from src when it runs dry or expires.
func (lz *Leases) Allow(src LeaseSource, rule *Rule, at Time) (bool, time.Duration) {
	now := int64(at)
	s := lz.Pool.Get().(*LeaseSlot)
	ok, contended := s.spend(at)
	if contended {
		s = lz.another()
	}
	if ok {
		lz.Pool.Put(s)
		return true, 0
	}
	got, retry, contended := src.TakeUpTo(rule, at, lz.size)
	if contended {
		lz.Heat(at)
	}
	if got > 0 {
		// Another processor may have filled the slot meanwhile (the pool
		// can hand one slot to two); then this lease, taken at this very
		// instant, goes straight back.
		if w := s.Word.Load(); w&leaseMask != 0 && fresh(w, at) || !s.Word.CompareAndSwap(w, PackLease(now, got-1)) {
			src.GiveBack(rule, at, got-1)
		}
		lz.Pool.Put(s)
		return true, 0
	}
	lz.Pool.Put(s)
	if lz.Steal(at) {
		return true, 0
	}
	return false, retry
}

// spend takes one token from a fresh lease. contended reports that another
// goroutine spent from the slot at the same moment.
func (s *LeaseSlot) spend(at Time) (ok, contended bool) {
	for {
		w := s.Word.Load()
		if w&leaseMask == 0 || !fresh(w, at) {
			return false, contended
		}
		if s.Word.CompareAndSwap(w, w-1) {
			return true, contended
		}
		contended = true
	}
}

// Steal spends one token from any processor's fresh lease, for a request
// that the bucket's word denied.
func (lz *Leases) Steal(at Time) bool {
	for i := range lz.Slots {
		if ok, _ := lz.Slots[i].spend(at); ok {
			return true
		}
	}
	return false
}

// Leased is the count of tokens held in fresh leases at now.
func (lz *Leases) Leased(at Time) int64 {
	var n int64
	for i := range lz.Slots {
		if w := lz.Slots[i].Word.Load(); fresh(w, at) {
			n += int64(w & leaseMask)
		}
	}
	return n
}

// StealOr answers a one-token request that the global bucket denied: with
// a token from any processor's fresh lease if there is one, otherwise with
// the denial. lz may be nil (a bucket too small to lease).
func (lz *Leases) StealOr(at Time, retry time.Duration) (bool, time.Duration) {
	if lz != nil && lz.Steal(at) {
		return true, 0
	}
	return false, retry
}

// StealInto is StealOr for a decision of n tokens: only a one-token
// denial can be turned into an admit.
func (lz *Leases) StealInto(d *render.Decision, at Time, n int64) {
	if d.Allowed || n != 1 {
		return
	}
	if ok, _ := lz.StealOr(at, 0); ok {
		d.Allowed, d.RetryAfter = true, 0
	}
}
