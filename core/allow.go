package gopherpace

import (
	"time"
)

// The paths of a one-token Allow. Allow is the hot path, so it has a few
// variants; each has a test that fails if it admits what it should not:
//
//	standalone, small bucket   allow on the word (bucket.go)             TestBucketConcurrentAdmitsExactlyTheBucketSize, FuzzBucketNeverExceedsRate
//	standalone, uncontended    allow, then a check for heat              TestLeasesStayColdWithoutContention
//	standalone, hot            a per-processor lease (lease.go)          TestLeasesHoldTheWindowBound, FuzzLeasingNeverExceedsRate
//	any, word denied           a token from any fresh lease              TestLeasesDenialSpendsAnyLease
//	clustered, normal          allow on the counted word                 TestCountedDecidesLikeBucket, FuzzCountedDecidesLikeBucket
//	clustered, hot             a lease counted for gossip                TestClusteredLeasesAdmitAndCountExactlyOneBucket
//	clustered, other modes     Engine.takeCounted (internal/cluster)     TestAccuracy, TestFailClosedWhenIsolated, TestCountedHandBackUnderLoad

// Allow spends one token of the global bucket now. When the bucket is empty
// it returns false and how long until a token is available. A clustered
// limiter that is cut off from every peer under the fail-closed policy
// returns (false, 1s).
//
// Allow never waits for tokens. A clustered node that has admitted its
// share of the bucket since its peers last heard from it waits for its
// report to reach them instead (a few milliseconds, at most maxReportWait),
// rather than refuse a request while the cluster has tokens; AllowAt does
// not wait.
func (l *Limiter) Allow() (bool, time.Duration) {
	now := int64(time.Since(l.epoch))
	ok, retry, waits := l.dec.allow(now)
	if waits {
		waitForReport(l.epoch, now, retry, func(now int64) (bool, time.Duration) {
			ok, retry, waits = l.dec.allow(now)
			return waits, retry
		})
	}
	if !ok {
		return l.refused(retry)
	}
	l.counts.allowOne.Add(1) // the admit path pays one add
	return true, 0
}

// AllowAt is Allow at the given time. It never waits.
func (l *Limiter) AllowAt(now time.Time) (bool, time.Duration) {
	ok, retry, _ := l.dec.allow(l.nanos(now))
	if !ok {
		return l.refused(retry)
	}
	l.counts.allowOne.Add(1)
	return true, 0
}

// refused ends Allow's pipeline (take.go has the steps) for a denial:
// shadow mode lets it through, or it is counted.
func (l *Limiter) refused(retry time.Duration) (bool, time.Duration) {
	if l.shadow != nil {
		l.noteShadowDenial()
		return true, 0
	}
	l.counts.denied.Add(1)
	return false, retry
}
