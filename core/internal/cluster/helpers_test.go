package cluster

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/render"
)

// Helpers shared by this package's tests.

func mustRule(t testing.TB, rate, bucketSize int64) *bucket.Rule {
	t.Helper()
	rule, err := bucket.NewRule(rate, time.Second, bucketSize)
	if err != nil {
		t.Fatal(err)
	}
	return rule
}

// take is bucket.TakeInto returning its decision, for tests of the plain
// word.
func take(tat *atomic.Int64, rule *bucket.Rule, now bucket.Time, n int64) (d render.Decision, ok bool) {
	ok = bucket.TakeInto(&d, tat, rule, now, n)
	return
}

func (c *countedWord) decide(rule *bucket.Rule, now bucket.Time, n int64) (d render.Decision) {
	c.take(&d, rule, now, n, noShare)
	return
}

// noShare is a share that never applies: the counted word decides alone.
var noShare = &shareBucket{}

// frozenTransport is a cluster of one that drops every frame, on a clock
// that stands still and never fires: no tick runs, so counts stay
// unreported for a test to read.
type frozenTransport struct{ now time.Time }

func (*frozenTransport) Name() string                                        { return "solo" }
func (*frozenTransport) MaxFrameSize() int                                   { return 1350 }
func (*frozenTransport) Broadcast([]byte) error                              { return nil }
func (*frozenTransport) Subscribe(func(string, []byte)) (unsubscribe func()) { return func() {} }
func (*frozenTransport) Members() []string                                   { return nil }
func (f *frozenTransport) Now() time.Time                                    { return f.now }
func (*frozenTransport) AfterFunc(time.Duration, func()) func() bool {
	return func() bool { return true }
}

// testEngine is a started engine of a limiter of rate tokens a second in
// a bucket of bucketSize, as core's New builds one, with leases sized for
// procs processors (none when procs is 0), on a frozen transport; it stops
// when the test ends.
type testEngine struct {
	*Engine
	rule       *bucket.Rule
	standalone *atomic.Int64
	leases     *bucket.Leases
	epoch      time.Time
}

func newTestEngine(t testing.TB, rate, bucketSize int64, procs int) *testEngine {
	t.Helper()
	rule := mustRule(t, rate, bucketSize)
	bucket.ClusteredReach(rule, false)
	var rules bucket.Book
	rules.Replace(&bucket.RuleSet{Default: rule})
	tr := &frozenTransport{now: time.Now()}
	te := &testEngine{rule: rule, standalone: new(atomic.Int64), epoch: tr.now}
	te.standalone.Store(bucket.Evicted)
	if procs > 0 {
		te.leases = bucket.NewLeasesFor(rule, procs)
		if te.leases == nil {
			t.Fatalf("a bucket of %d does not lease", bucketSize)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	te.Engine = New(Parts{Epoch: te.epoch, Name: tr.Name(), Log: log, Rules: &rules,
		Keys: NewStore(1<<20, log, rules.ForKey), Standalone: te.standalone, Leases: te.leases},
		Config{LimiterID: "test", Transport: tr, Clock: tr, Interval: 100 * time.Millisecond, Grace: 10 * time.Second})
	te.Start()
	t.Cleanup(te.Stop)
	return te
}
