package gopherpace

import "time"

// load is one node's admit and demand rates, measured from its running
// totals over a sliding window: the change between the newest sample and
// the oldest one still within fairWindow of it, over the time between
// them. Unlike a decaying average it does not read low between a peer's
// frames.
type load struct {
	samples [loadSamples]loadSample
	n, next int
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
// reordered frame) are ignored; so are samples closer than loadSpacing to
// the newest, but the newest always holds the latest totals.
func (l *load) observe(admitTotal, demandTotal uint64, now int64) {
	if l.n > 0 {
		last := &l.samples[(l.next+loadSamples-1)%loadSamples]
		if admitTotal < last.admitTotal || demandTotal < last.demandTotal || now < last.at {
			return
		}
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
// apart, or when the newest is older than fairWindow at now.
func (l *load) rates(now int64) (admits, demand float64) {
	if l.n < 2 {
		return 0, 0
	}
	newest := l.samples[(l.next+loadSamples-1)%loadSamples]
	if now-newest.at > fairWindow {
		return 0, 0
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
		return 0, 0
	}
	return float64(newest.admitTotal-oldest.admitTotal) / span, float64(newest.demandTotal-oldest.demandTotal) / span
}
