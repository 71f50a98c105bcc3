// Package rate is golang.org/x/time/rate's API (the same names, signatures
// and documented behaviour) on gopherpace's buckets, standalone by default
// and cluster-wide with one option. A program moves to it by its import
// line:
//
//	import "github.com/pedreviljoen/gopherpace/core/rate"
//
//	lim := rate.NewLimiter(rate.Every(100*time.Millisecond), 5)
//
// and to one limit across every replica of a service with Clustered:
//
//	lim := rate.NewLimiter(10, 5, rate.Clustered(transport, gopherpace.WithLimiterID("github-api")))
//	defer lim.Close()
//
// Standalone, a Limiter starts no goroutine, needs no Close, and works
// inside a testing/synctest bubble, as x/time/rate's does.
//
// # Where it differs from x/time/rate
//
// Tokens are kept as a GCRA time in integer nanoseconds, not a float, so:
//
//   - A limit refills one token every 1e9/r ns rounded up: a limit of 3 a
//     second allows 2.99999999 a second, never more; limits above 1e9 a
//     second refill a token a nanosecond.
//   - Time that runs backwards never allows more. x/time/rate's bucket
//     refills again over times it had already passed when a caller's
//     times alternate before and after the last one (golang/go#56287);
//     here a time before one already seen finds the bucket emptier, not
//     fuller.
//   - An n below zero spends nothing and gives nothing back (in
//     x/time/rate it adds tokens, golang/go#54082): give tokens back with
//     Reservation.Cancel.
//   - Sums never overflow: a bucket holds at most 36 years of refill (a
//     larger burst acts as that), a time is read to within 36 years of
//     the limiter's first, and a reservation more than 73 years ahead is
//     not OK.
//   - Under a limit that refills nothing (zero, or below one token in
//     146 years), a reservation for tokens the bucket lacks is not OK:
//     x/time/rate's is OK with a delay of about 292 years.
//   - Error texts of WaitN are this package's own; the conditions are
//     x/time/rate's.
//
// Clustered differs further; see Clustered.
package rate
