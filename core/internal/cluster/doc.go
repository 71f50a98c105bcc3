// Package cluster is the engine of a clustered limiter: it counts what
// this node admits, reports it to the peers, charges the peers' reports to
// this node's replicas, and shares the bucket while it is contended or
// while only part of the cluster is in sight. docs/design.md explains the
// algorithm and its bounds; engine.go lists the parts and the file that
// owns each.
//
// Package gopherpace (core) is its only importer. Its surface is small:
//
//   - New wires an Engine from a limiter's Parts (the rules, the keyed
//     Store, the standalone word, the leases) and its Config (the
//     options); Start sets it going and Stop says goodbye.
//   - The request path: Allow, TakeGlobal, TakeKeyed, RefundGlobal,
//     RefundKeyed, ChargeGlobal, ChargeKeyed, ReserveGlobal,
//     ReserveKeyed. It takes no lock and allocates nothing; every time it
//     is given is the limiter's, in nanoseconds since the epoch.
//   - Reading and changing the buckets: PeekGlobal, PeekKeyed,
//     ResetGlobal, ResetKeyed, AdmitRule, Reprice, RepriceKey.
//   - What a status page shows: FillStats (core's Stats, field for field),
//     Peers.
//
// It imports the bucket arithmetic (internal/bucket), the datagram layer
// (internal/datagram), the wire format (internal/wire), the decisions'
// fields (internal/render) and transportkit's Clock; none of them imports
// it.
package cluster
