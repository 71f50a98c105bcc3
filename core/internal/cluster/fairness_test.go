package cluster

import (
	"math"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

// A node whose load has only just begun when the bucket turns contended
// gets a tiny share at first (its demand has barely been measured), and
// the share tokens it spends at that price must not leave it locked out
// once its real share is known. Over real memberlist on a loaded machine,
// one node was held to a fifth of its share for four seconds this way.
func TestQuotaRepricesTokensOwed(t *testing.T) {
	var q shareBucket
	const now = int64(10 * time.Second)
	slow := int64(2 * time.Second) // half a token a second
	q.set(slow, 2*slow, bucket.Time(now))
	for range 3 {
		q.take(1, now) // two pass; the third is refused
	}
	if ok, wait := q.take(1, now); ok || wait <= time.Second {
		t.Fatalf("tiny share: take = %v, wait %v; want a refusal of over a second", ok, wait)
	}
	fast := int64(8 * time.Millisecond)
	q.set(fast, 2*fast, bucket.Time(now))
	// The two tokens owed now cost 16ms: the share is full again by then.
	if ok, wait := q.take(1, now+2*fast); !ok {
		t.Fatalf("after the share grew: refused, wait %v; want the tokens owed repriced", wait)
	}
	if got := q.tat.Load() - now; got > 3*fast {
		t.Fatalf("share runs %v ahead after repricing; want at most %v", time.Duration(got), time.Duration(3*fast))
	}
	// Repricing never grants more than the share holds.
	q.set(fast, 2*fast, bucket.Time(now+2*fast))
	if room := q.room(now + 2*fast); room > 2 {
		t.Fatalf("room %d after repricing; the share holds at most 2", room)
	}
}

// saturate never hands an out-of-range float to the processor's conversion,
// which Go leaves to each GOARCH: every processor gets these answers.
func TestSaturateIsTheSameEverywhere(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		f      float64
		lo, hi int64
		want   int64
	}{
		{1e30, 1, 1 << 58, 1 << 58},
		{inf, 1, 1 << 58, 1 << 58},
		{math.NaN(), 1, 1 << 58, 1 << 58},
		{-inf, 1, 1 << 58, 1},
		{-1e30, 0, 10, 0},
		{0.5, 1, 10, 1},
		{7.9, 1, 10, 7},
		{float64(math.MaxInt64), 0, math.MaxInt64, math.MaxInt64},
	} {
		if got := saturate(tc.f, tc.lo, tc.hi); got != tc.want {
			t.Errorf("saturate(%g, %d, %d) = %d, want %d", tc.f, tc.lo, tc.hi, got, tc.want)
		}
	}
}

// A peer's totals grow at most maxPerNs tokens a nanosecond since its last
// sample (plus a fair window's worth), so its rates stay finite and
// bounded whatever it claims; honest growth passes unchanged.
func TestLoadClampsImplausibleGrowth(t *testing.T) {
	const perNs = 100
	var l load
	ms := int64(time.Millisecond)
	l.observe(0, 0, 0, perNs)
	l.observe(10, 1000, 100*ms, perNs) // honest
	l.observe(math.MaxUint64, math.MaxUint64, 200*ms, perNs)
	a, d, _ := l.rates(200 * ms)
	most := float64(perNs) * float64(100*ms+fairWindow) / 0.2
	if d > most+1000/0.2 || a > most+10/0.2 || math.IsInf(d, 0) {
		t.Fatalf("rates %g admits/s, %g demand/s after a total of 2^64-1: over the growth bound %g", a, d, most)
	}
	var h load
	h.observe(0, 0, 0, perNs)
	h.observe(500, 5000, 250*ms, perNs)
	if a, d, ok := h.rates(250 * ms); !ok || a != 2000 || d != 20000 {
		t.Fatalf("honest rates %g, %g, want 2000, 20000", a, d)
	}
}

// Totals that go back are a reordered frame, dropped while newer ones
// follow, or the end of a lie about them: after fairWindow of nothing
// higher they are the new start, and the rates are measured from them.
func TestLoadStartsAgainFromTotalsThatStayBehind(t *testing.T) {
	ms := int64(time.Millisecond)
	var l load
	l.observe(0, 0, 0, math.MaxInt64)
	l.observe(1000, 1000, 100*ms, math.MaxInt64)
	l.observe(900, 900, 110*ms, math.MaxInt64) // reordered
	l.observe(2000, 2000, 200*ms, math.MaxInt64)
	if a, _, ok := l.rates(200 * ms); !ok || a != 10_000 {
		t.Fatalf("after a reordered frame: %g admits/s (measured %v), want 10000", a, ok)
	}
	l.observe(1e12, 1e12, 300*ms, math.MaxInt64) // a lie
	for at := 320 * ms; at <= 2000*ms; at += 20 * ms {
		truth := uint64(2000 + (at-200*ms)/ms*10) // 10 a ms, as before the lie
		l.observe(truth, truth, at, math.MaxInt64)
	}
	a, _, ok := l.rates(2000 * ms)
	if !ok || a < 9_999 || a > 10_001 {
		t.Fatalf("1.7 s after a lie ended: %g admits/s (measured %v), want 10000", a, ok)
	}
}

// A sliced share admits its fraction of the tokens asked for, whatever
// the times of the requests: a tenth, over a thousand requests, is a
// hundred admits, none saved up by a pause.
func TestSlicedShareAdmitsItsFraction(t *testing.T) {
	var q shareBucket
	q.slice(0.1, int64(time.Second))
	admits := 0
	for i := range 1000 {
		now := int64(i) * int64(time.Millisecond)
		if i == 500 {
			now += int64(time.Hour) // a pause earns nothing
		}
		if ok, wait := q.take(1, now); ok {
			admits++
		} else if wait != time.Second {
			t.Fatalf("refused with a wait of %v; want the second given", wait)
		}
	}
	if admits < 99 || admits > 101 {
		t.Fatalf("a tenth of 1,000 requests admitted %d; want 100", admits)
	}
	// Bigger requests earn in proportion: 100 requests of 5 tokens earn 50
	// tokens, 10 admits.
	admits = 0
	for range 100 {
		if ok, _ := q.take(5, 0); ok {
			admits++
		}
	}
	if admits < 9 || admits > 11 {
		t.Fatalf("a tenth of 100 requests of 5 tokens: %d admits; want 10", admits)
	}
}

// While the replica is empty, a sliced share saves up nothing: each
// refused request spends the credit as an admit would, so when the
// replica refills, this node's next admits come at its fraction again,
// not at once. (Priced as a bucket, every node of a thousand spent its
// saved token in the same few milliseconds.)
func TestSlicedShareSavesNothingWhileTheReplicaIsEmpty(t *testing.T) {
	var q, twin shareBucket
	for _, b := range []*shareBucket{&q, &twin} {
		b.slice(0.3, int64(time.Second))
		b.on.Store(true) // contended, as rebalance leaves it
	}
	// A refusal by the replica moves the credit exactly as a request the
	// share decides: 7 of them earn 2.1 tokens and spend 2. (Doing nothing
	// would leave 0; saving up, a whole token.)
	for range 7 {
		q.forfeit(1, 0, false)
		twin.take(1, 0)
	}
	if got, want := q.credit.Load(), twin.credit.Load(); got != want || got == 0 || got >= sliceOne {
		t.Fatalf("after 7 refusals the credit is %d; 7 requests leave %d", got, want)
	}
	for range 1000 {
		q.forfeit(1, 0, false)
	}
	admits := 0
	for range 10 {
		if ok, _ := q.take(1, 0); ok {
			admits++
		}
	}
	if admits > 4 {
		t.Fatalf("after 1,000 refusals by the replica, %d of the next 10 requests admitted; want 3 or 4 (its fraction)", admits)
	}
	// A share taken for an admit that then did not happen (a lost
	// compare-and-swap) comes back whole.
	q.credit.Store(0)
	q.giveBack(3, 0)
	if room := q.room(0); room != 3 {
		t.Fatalf("room %d after giving 3 back; want 3", room)
	}
	// A share taken and then refused by the replica is spent: forfeit
	// with held gives nothing back.
	q.forfeit(3, 0, true)
	if room := q.room(0); room != 3 {
		t.Fatalf("room %d after a held forfeit; want it unchanged at 3", room)
	}
	// Priced as a bucket again, the share forgets its slicing, and a share
	// token taken for an admit the replica then refused comes back.
	q.set(int64(10*time.Millisecond), int64(20*time.Millisecond), 0)
	if q.slicing() {
		t.Fatal("a share priced as a bucket still slices")
	}
	before := q.room(0)
	if ok, _ := q.take(1, 0); !ok {
		t.Fatal("a full share bucket refused a token")
	}
	q.forfeit(1, 0, true)
	if room := q.room(0); room != before {
		t.Fatalf("room %d after a held forfeit of a share bucket; want %d back", room, before)
	}
}

// A share holds what its node earns over the longest pause between its
// asks, measured between asks (admitted or refused), each tick afresh, and
// not across a time the share was off.
func TestShareHoldsWhatANodeEarnsOverItsPauses(t *testing.T) {
	var q shareBucket
	q.on.Store(true)
	ms := int64(time.Millisecond)
	for _, at := range []int64{100, 102, 103, 130, 131} {
		q.asked(at * ms)
	}
	if got := q.pauseSinceTick(); got != 27*ms {
		t.Fatalf("longest pause %v; want 27ms", time.Duration(got))
	}
	q.asked(135 * ms)
	if got := q.pauseSinceTick(); got != 4*ms {
		t.Fatalf("next tick's pause %v; want 4ms, measured afresh", time.Duration(got))
	}
	q.on.Store(false)
	q.pauseSinceTick()
	q.on.Store(true)
	q.asked(900 * ms)
	q.asked(901 * ms)
	if got := q.pauseSinceTick(); got != ms {
		t.Fatalf("pause %v after the share was off; want 1ms: the time off is no pause", time.Duration(got))
	}
	// A refusal by the replica is an ask too; one while the share is
	// off is not.
	q.forfeit(1, 910*ms, false)
	q.on.Store(false)
	q.forfeit(1, 990*ms, false)
	q.on.Store(true)
	if got := q.pauseSinceTick(); got != 9*ms {
		t.Fatalf("pause %v; want 9ms, from the refusal while on", time.Duration(got))
	}

	tick := 50 * ms
	iv := int64(time.Second) / 800 // a share of 800 a second
	for _, tc := range []struct {
		pause int64
		want  int64 // tokens held
	}{
		{0, 10},                       // a quarter of a tick: 12.5 ms of 800/s
		{5 * ms, 10},                  // a pause shorter than the quarter
		{30 * ms, 24},                 // the pause
		{time.Hour.Nanoseconds(), 40}, // never over a tick
	} {
		if got := shareTolerance(800, iv, tick, tc.pause) / iv; got != tc.want {
			t.Errorf("pause %v: holds %d tokens, want %d", time.Duration(tc.pause), got, tc.want)
		}
	}
	if got := shareTolerance(10, int64(time.Second)/10, tick, 0) / (int64(time.Second) / 10); got != 2 {
		t.Errorf("a share of 10/s holds %d tokens; want the floor of 2", got)
	}
}

// Shares filled while the replica was empty must not all come due at its
// first refill: a request the replica refuses leaves a share at most its
// node's phase of a token. With every node's requests at the same
// instants, 100 nodes' full shares spent a clump of 100 tokens at each
// refill.
func TestRefusedSharesComeDueOutOfStep(t *testing.T) {
	const nodes = 100
	ms := int64(time.Millisecond)
	iv := 100 * ms // 10 tokens a second each: an even split of 1,000/s
	shares := make([]shareBucket, nodes)
	for i := range shares {
		shares[i].init(int64(i) * sliceOne / nodes)
		shares[i].set(iv, 2*iv, 0) // holds two tokens, as shareTolerance gives
		shares[i].on.Store(true)
	}
	t0 := int64(time.Second)
	if room := shares[0].room(t0); room != 2 {
		t.Fatalf("a share left alone holds %d tokens at the refill; want 2 (what rephase must undo)", room)
	}
	for i := range shares {
		shares[i].forfeit(1, t0, false) // the empty replica refuses them all
	}
	due := make([]bool, nodes)
	for at := t0; at < t0+iv; at += 10 * ms {
		n := 0
		for i := range shares {
			if !due[i] && shares[i].room(at) >= 1 {
				due[i] = true
				n++
			}
		}
		if at == t0 && n > 0 {
			t.Fatalf("%d shares hold a token at the refusal itself; want none", n)
		}
		if n > 12 {
			t.Fatalf("%d shares came due in the 10 ms to %v; want about 10 (a tenth of them)", n, time.Duration(at-t0))
		}
	}
	for i := range shares {
		if shares[i].room(t0+iv) < 1 {
			t.Fatalf("share %d still holds no token a whole token's time after the refusal", i)
		}
	}
}

// The lag withheld at once for the past, when a peer heard through relays
// is suspected, is the replicas' to pay: the shares' clock leaves it out.
func TestSharesLeaveOutTheLagCaughtUp(t *testing.T) {
	te := newTestEngine(t, 1000, 1000, 0)
	te.mu.Lock()
	defer te.mu.Unlock()
	v := &te.view
	now := int64(5 * time.Second)
	v.lastFrame = now // relays still arrive: the relayed peer gets its slack
	p := &peer{name: "far", heard: true, relayed: true, lastHeard: now - v.suspectOf(&peer{relayed: true}, now) - int64(10*time.Millisecond)}
	since := now - int64(10*time.Millisecond)
	const known = 2
	early := p.lastHeard + v.suspectAfter()
	lag0 := v.lag.Load()
	v.slowClock(now, since, []*peer{p}, known, false)
	if got, want := v.lag.Load()-lag0, (now-early)/known; got != want {
		t.Fatalf("lag grew %v; want %v: the peer's share since it would have been suspected as a mate", time.Duration(got), time.Duration(want))
	}
	caught := v.caughtUpLag()
	if want := (since - early) / known; caught != want {
		t.Fatalf("caught up %v; want %v: the share of the time before this evaluation", time.Duration(caught), time.Duration(want))
	}
	v.slowClock(now+int64(10*time.Millisecond), now, []*peer{p}, known, false)
	if v.caughtUpLag() != caught {
		t.Fatalf("caught up %v after a second evaluation; want it unchanged at %v", time.Duration(v.caughtUpLag()), time.Duration(caught))
	}
	te.fair.rebalance(now, 0)
	if got := te.fair.share.shareTime(now) - now; got != caught {
		t.Fatalf("the shares' clock runs %v ahead of the buckets'; want %v", time.Duration(got), time.Duration(caught))
	}
}

// racingWord is a counted word whose unreported admits grow between any
// two reads, as the request path's admits land while a tick reads them.
type racingWord struct {
	sharedWord
	admits int64
}

func (w *racingWord) pending() int64 { w.admits += 1000; return w.admits }

// A node's own admits and demand are read at one instant: admits landing
// between two reads of the unreported count made demand outrun admits, so
// a burst with nothing refused looked contended and the gate held back
// its last quarter (a lone node's burst of 10,000 stopped at 7,500).
func TestOwnLoadIsReadOnce(t *testing.T) {
	te := newTestEngine(t, 1, 10_000, 0)
	te.mu.Lock()
	defer te.mu.Unlock()
	te.fair.word = &racingWord{sharedWord: te.fair.word}
	now := te.startedAt
	for i := 1; i <= 20; i++ { // through the first fairWindow and past it
		now += int64(50 * time.Millisecond)
		te.fair.rebalance(now, 0)
		if te.fair.share.on.Load() {
			t.Fatalf("tick %d: the share gates a node that refused nothing", i)
		}
	}
}
