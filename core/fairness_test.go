package gopherpace

import (
	"testing"
	"time"
)

// A node whose load has only just begun when the bucket turns contended
// gets a tiny share at first (its demand has barely been measured), and
// the quota tokens it spends at that price must not leave it locked out
// once its real share is known. Over real memberlist on a loaded machine,
// one node was held to a fifth of its share for four seconds this way.
func TestQuotaRepricesTokensOwed(t *testing.T) {
	var q quota
	const now = int64(10 * time.Second)
	slow := int64(2 * time.Second) // half a token a second
	q.set(slow, 2*slow, now)
	for range 3 {
		q.take(1, now) // two pass; the third is refused
	}
	if ok, wait := q.take(1, now); ok || wait <= time.Second {
		t.Fatalf("tiny share: take = %v, wait %v; want a refusal of over a second", ok, wait)
	}
	fast := int64(8 * time.Millisecond)
	q.set(fast, 2*fast, now)
	// The two tokens owed now cost 16ms: the quota is full again by then.
	if ok, wait := q.take(1, now+2*fast); !ok {
		t.Fatalf("after the share grew: refused, wait %v; want the tokens owed repriced", wait)
	}
	if got := q.tat.Load() - now; got > 3*fast {
		t.Fatalf("quota runs %v ahead after repricing; want at most %v", time.Duration(got), time.Duration(3*fast))
	}
	// Repricing never grants more than the quota holds.
	q.set(fast, 2*fast, now+2*fast)
	if room := q.room(now + 2*fast); room > 2 {
		t.Fatalf("room %d after repricing; the quota holds at most 2", room)
	}
}
