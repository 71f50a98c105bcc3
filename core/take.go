package gopherpace

import "time"

// Take spends n tokens of key's bucket now; the key "" is the global
// bucket. It returns an error only for a cost below 1 or above the key's
// bucket size; a denial is a Decision with Allowed false.
func (l *Limiter) Take(key string, n int64) (d Decision, err error) {
	err = l.take(&d, int64(time.Since(l.epoch)), key, n)
	return
}

// TakeAt is Take at the given time.
func (l *Limiter) TakeAt(now time.Time, key string, n int64) (d Decision, err error) {
	err = l.take(&d, l.nanos(now), key, n)
	return
}

// take decides into d, which saves copying a Decision up every level.
func (l *Limiter) take(d *Decision, now int64, key string, n int64) error {
	if key == "" {
		p := l.pols.def
		if err := p.checkCost(n); err != nil {
			return err
		}
		if l.eng != nil {
			l.eng.take(d, now, n)
			return nil
		}
		takeInto(d, &l.global.tat, p, now, n)
		stealInto(l.leases, d, now, n)
		return nil
	}
	h := hashKey(l.hashSecret, key)
	p := l.pols.forKey(h)
	if err := p.checkCost(n); err != nil {
		return err
	}
	if l.eng != nil {
		l.eng.takeKeyed(d, h, p, now, n)
		return nil
	}
	l.keys.take(d, h, p, now, n)
	return nil
}

// Refund gives back n tokens to key's bucket, for a request that was
// allowed but should not count (for example one that failed). A bucket is
// never filled past full. Clustered, a refund of tokens not yet reported to
// peers also takes them out of the report.
func (l *Limiter) Refund(key string, n int64) {
	l.refund(int64(time.Since(l.epoch)), key, n)
}

// RefundAt is Refund at the given time.
func (l *Limiter) RefundAt(now time.Time, key string, n int64) {
	l.refund(l.nanos(now), key, n)
}

func (l *Limiter) refund(now int64, key string, n int64) {
	if n < 1 {
		return
	}
	if key == "" {
		n = min(n, l.pols.def.burst)
		if l.eng != nil {
			l.eng.refundGlobal(now, n)
			return
		}
		refund(&l.global.tat, l.pols.def, now, n)
		return
	}
	h := hashKey(l.hashSecret, key)
	p := l.pols.forKey(h)
	n = min(n, p.burst)
	if l.eng != nil {
		l.eng.refundKeyed(h, p, now, n)
		return
	}
	if e := l.keys.lookup(h); e != nil {
		refund(&e.tat, p, now, n)
	}
}
