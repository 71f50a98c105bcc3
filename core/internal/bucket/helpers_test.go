package bucket

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// mustRule is a rule of rate tokens a second in a bucket of bucketSize.
func mustRule(t testing.TB, rate, bucketSize int64) *Rule {
	t.Helper()
	rule, err := NewRule(rate, time.Second, bucketSize)
	if err != nil {
		t.Fatal(err)
	}
	return rule
}

// take spends n tokens of the bucket word tat at now.
func take(tat *atomic.Int64, rule *Rule, now Time, n int64) (d render.Decision, ok bool) {
	ok = TakeInto(&d, tat, rule, now, n)
	return
}
