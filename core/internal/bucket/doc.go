// Package bucket is the bucket arithmetic under every limiter: GCRA on one
// atomic word in integer nanoseconds (bucket.go), rules compiled from a
// rate and a bucket size (rule.go), per-processor leases of a hot bucket
// (lease.go), the rules in force (rule_book.go), the keyed store with its
// lock-free table and the debts of evicted keys (store.go, keytable.go,
// ghosts.go), the keyed hash that names keys (keyhash.go), a rule change's
// repricing (reprice.go) and per-processor counters (proc_counter.go).
//
// It holds no cluster state: a clustered store's entries, the counted
// word and the shares are the engine's, in package cluster (a rule
// carries the caps the engine sets: SizeCaps, ClusteredReach). Every
// operation takes a Time, a limiter's clock less the lag of peers out of
// sight, so that a caller's time passed where a bucket's is due does not
// compile. Decisions are filled as render.Decision, which package
// gopherpace's Decision converts to without a copy.
package bucket
