package gopherpace

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
)

// Refund gives back n tokens to key's bucket, for a request that was
// allowed but should not count (for example one that failed). A bucket is
// never filled past full. A refund of more tokens than the key can have
// spent within its bucket's window (what it still owes, and one bucket
// besides) is refused whole: ErrRefundExceedsSpent, counted in
// Stats.RefundsRefused and logged at WARN at most every 30 s. Clustered,
// a refund of tokens not yet reported to peers also takes them out of the
// report.
//
// Whoever can call Refund can undo its own spending: let only code you
// trust refund, never a client's say-so.
func (l *Limiter) Refund(key string, n int64) error {
	return l.refund(int64(time.Since(l.epoch)), key, n)
}

// RefundAt is Refund at the given time.
func (l *Limiter) RefundAt(now time.Time, key string, n int64) error {
	return l.refund(l.nanos(now), key, n)
}

func (l *Limiter) refund(now int64, key string, n int64) error {
	if n < 1 {
		return nil
	}
	var ok bool
	if key == "" {
		ok = l.dec.refundGlobal(now, n)
	} else {
		h := l.hasher.Sum(key)
		ok = l.dec.refundKeyed(h, l.keyRule(h, key, now), now, n)
	}
	if ok {
		return nil
	}
	l.refundsRefused.note(l.log, now, key, n)
	return fmt.Errorf("%w: %d tokens", ErrRefundExceedsSpent, n)
}

// refusedRefunds counts the refunds refused, and says so at WARN at most
// every 30 s of the limiter's time.
type refusedRefunds struct {
	count    atomic.Uint64
	lastWarn atomic.Int64 // limiter time of the last record, +1
}

func (r *refusedRefunds) note(log *slog.Logger, now int64, key string, n int64) {
	total := r.count.Add(1)
	at := now + 1 // 0 is never
	last := r.lastWarn.Load()
	if last != 0 && at-last < int64(30*time.Second) || !r.lastWarn.CompareAndSwap(last, at) {
		return
	}
	// A copy: the caller's key is often its request's own bytes, which
	// must not escape to the heap on every refund for the rare record.
	shown := strings.Clone(key[:min(len(key), 64)])
	log.Warn("a refund of more tokens than the key can have spent was refused: a bug, or a caller undoing others' spending",
		"key", shown, "tokens", n, "refused so far", total)
}
