package gopherpace

import (
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

// Shadow mode (WithShadowMode): every decision is made as usual, and a
// denial is turned into a pass at the last step, spending nothing.

// shadowing counts the denials let through, and spaces the records that
// say so.
type shadowing struct {
	denials bucket.ProcCounter
	logged  atomic.Int64 // denials counted at the last record
	lastLog atomic.Int64 // ns since the epoch
}

// shadowLogEvery spaces the INFO records of shadow mode.
const shadowLogEvery = int64(30 * time.Second)

// letThrough turns the denial in d into a pass, counts it, and says so at
// most every shadowLogEvery. It reports true, for shadowed's one line. It
// is kept out of line so that shadowed, on every decision's path, inlines.
//
//go:noinline
func (l *Limiter) letThrough(d *Decision) bool {
	d.Allowed, d.Shadowed = true, true
	l.noteShadowDenial()
	return true
}

func (l *Limiter) noteShadowDenial() {
	s := l.shadow
	s.denials.Add(1)
	now := int64(time.Since(l.epoch))
	last := s.lastLog.Load()
	if last != 0 && now-last < shadowLogEvery || !s.lastLog.CompareAndSwap(last, now) {
		return
	}
	total := s.denials.Load()
	rule := l.rules.Default()
	l.log.Info("shadow mode: let requests over the limit through", "node", l.name,
		"let through", total-s.logged.Swap(total), "rate", rule.Tokens, "per", rule.Per, "bucket_size", rule.BucketSize)
}
