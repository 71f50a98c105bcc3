package cluster

import "github.com/pedreviljoen/gopherpace/core/internal/bucket"

// The clustered side of Charge and Reserve (core's charge.go and
// reserve.go): tokens spent into debt, and bookings, counted for gossip
// like any admit.

// ChargeGlobal charges the counted word and counts what it spent for
// gossip; once the limiter has closed, the standalone word takes it.
func (e *Engine) ChargeGlobal(now, n int64) (int64, int64) {
	rule, at := e.rules.Default(), e.bucketTime(now)
	charged, count, ahead, ok := e.word.charge(rule, at, n, bucket.ChargeDebt(rule))
	if !ok {
		return bucket.Debit(e.standalone, rule, bucket.StandaloneTime(now), n, bucket.ChargeDebt(rule))
	}
	if charged > 0 && e.mode.get() != modeStopped {
		e.send.counted(count, charged, rule)
	}
	return charged, ahead
}

func (e *Engine) ChargeKeyed(h uint64, rule *bucket.Rule, now, n int64) (int64, int64, bool) {
	ent, charged, ahead := e.keys.Debit(h, rule, e.bucketTime(now), n, bucket.ChargeDebt(rule))
	if ent == nil {
		return 0, 0, false
	}
	if charged > 0 {
		e.countKeyed(h, ent, rule, charged)
	}
	return charged, ahead, true
}

func (e *Engine) ReserveGlobal(now, n, ahead int64) (wait int64, ok, waits bool) {
	c, rule := &e.word, e.rules.Default()
	switch m := e.mode.get(); {
	case m == modeStopped:
		wait, ok, _ = bucket.Reserve(e.standalone, rule, bucket.StandaloneTime(now), n, ahead)
		return wait, ok, false
	case m == modeFailClosed || e.farFromClock(now):
		return 0, false, false
	case m == modePreContact:
		return 0, false, true // the first contact decides
	}
	if _, capped := e.overCap(c.unheard(), rule, n); capped {
		return 0, false, true
	}
	wait, count, ok, alive := c.reserve(rule, e.bucketTime(now), n, ahead)
	if !alive { // handed back: the limiter has closed
		wait, ok, _ = bucket.Reserve(e.standalone, rule, bucket.StandaloneTime(now), n, ahead)
		return wait, ok, false
	}
	if ok {
		e.send.counted(count, n, rule)
	}
	return wait, ok, false
}

func (e *Engine) ReserveKeyed(h uint64, rule *bucket.Rule, now, n, ahead int64) (wait int64, ok, waits bool) {
	if e.mode.get() == modeFailClosed {
		return 0, false, false
	}
	at := e.bucketTime(now)
	for {
		ent := e.keys.Get(h, at)
		if ent == nil {
			return 0, false, false
		}
		if _, capped := e.overCap(ent.pending.Load()+ent.inflight.Load(), rule, n); capped {
			return 0, false, true
		}
		if wait, ok, alive := bucket.Reserve(&ent.tat, rule, at, n, ahead); alive {
			if ok {
				e.countKeyed(h, ent, rule, n)
			}
			return wait, ok, false
		}
	}
}
