package gopherpace

import "time"

// maxReportWait bounds how long the real-clock forms wait for the report
// (see Allow): a report's flush and its flight take 3 to 6 ms, and a
// starved scheduler fires their timers late (docs/design.md, the cap).
const maxReportWait = 25 * time.Millisecond

// waitForReport is the one loop in which every real-clock form (Allow,
// Take, TakeTimed, Wrap, Limits.TakeAll and the adapters through them)
// waits for this node's report: it sleeps retry, reads the clock and
// decides again, until the decision no longer waits or maxReportWait has
// passed since the first try, made at first (ns since epoch). decide
// reports whether it still waits, and the retry to sleep if so. It returns
// the time of the last try. The ...At forms never come here: they return
// the wait as a denial.
func waitForReport(epoch time.Time, first int64, retry time.Duration, decide func(now int64) (waits bool, retry time.Duration)) int64 {
	now := first
	for deadline := first + int64(maxReportWait); now < deadline; {
		time.Sleep(retry)
		now = int64(time.Since(epoch))
		var waits bool
		if waits, retry = decide(now); !waits {
			break
		}
	}
	return now
}
