package cluster

import (
	"math"
	"math/bits"
	"time"
)

// load is one node's admit and demand rates, measured from its running
// totals over a sliding window: the change between the newest sample and
// the oldest one still within fairWindow of it, over the time between
// them. Unlike a decaying average it does not read low between a peer's
// frames.
type load struct {
	samples [loadSamples]loadSample
	n, next int
	// behindSince is when totals below the newest sample's began to
	// arrive with none above it since, if behind. Real running totals
	// never go back: such frames are reordered or resent copies, which a
	// newer frame follows at once, or the end of a peer's lie about its
	// totals, after which every frame is below the lie.
	behindSince int64
	behind      bool
}

type loadSample struct {
	at                      int64
	admitTotal, demandTotal uint64
}

const (
	loadSamples = 32
	// loadSpacing is the least time between two samples kept.
	loadSpacing = int64(20 * time.Millisecond)
	fairWindow  = int64(500 * time.Millisecond)
)

// observe takes new running totals at now. Totals that go back (a
// reordered frame) are ignored, unless every frame has gone back for
// fairWindow: a peer that lied about its totals and tells the truth
// again, measured afresh from its true totals rather than never again.
// Samples closer than loadSpacing to the newest are ignored too, but the
// newest always holds the latest totals.
//
// A total grows by at most maxPerNs tokens per nanosecond since the newest
// sample (plus a fairWindow's worth, for frames that arrive bunched):
// more than a real node can be offered, so only a lie is cut, and the
// rates stay finite whatever a peer claims (docs/security.md).
func (l *load) observe(admitTotal, demandTotal uint64, now, maxPerNs int64) {
	if l.n > 0 {
		last := &l.samples[(l.next+loadSamples-1)%loadSamples]
		if admitTotal < last.admitTotal || demandTotal < last.demandTotal || now < last.at {
			switch {
			case now < last.at:
			case !l.behind:
				l.behind, l.behindSince = true, now
			case now-l.behindSince >= fairWindow:
				*l = load{} // start again from these totals
				l.observe(admitTotal, demandTotal, now, maxPerNs)
			}
			return
		}
		l.behind = false
		most := satMul(uint64(now-last.at+fairWindow), uint64(maxPerNs))
		admitTotal = last.admitTotal + min(admitTotal-last.admitTotal, most)
		demandTotal = last.demandTotal + min(demandTotal-last.demandTotal, most)
		if l.n > 1 && now-l.samples[(l.next+loadSamples-2)%loadSamples].at < loadSpacing {
			*last = loadSample{now, admitTotal, demandTotal} // move the newest
			return
		}
	}
	l.samples[l.next] = loadSample{now, admitTotal, demandTotal}
	l.next = (l.next + 1) % loadSamples
	l.n = min(l.n+1, loadSamples)
}

// rates are the admit and demand rates, per second, over the window that
// ends at the newest sample; zero until two samples are fairWindow/4
// apart, or when the newest is older than fairWindow at now; measured
// reports whether there was such a window (a peer heard too briefly has
// none, which is not the same as idle).
func (l *load) rates(now int64) (admits, demand float64, measured bool) {
	if l.n < 2 {
		return 0, 0, false
	}
	newest := l.samples[(l.next+loadSamples-1)%loadSamples]
	if now-newest.at > fairWindow {
		return 0, 0, false
	}
	oldest := newest
	for k := 2; k <= l.n; k++ {
		s := l.samples[(l.next+loadSamples-k)%loadSamples]
		if newest.at-s.at > fairWindow {
			break
		}
		oldest = s
	}
	span := float64(newest.at-oldest.at) / float64(time.Second)
	if newest.at-oldest.at < fairWindow/4 {
		return 0, 0, false
	}
	return float64(newest.admitTotal-oldest.admitTotal) / span, float64(newest.demandTotal-oldest.demandTotal) / span, true
}

// satMul is a·b, saturating at the largest uint64.
func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}
