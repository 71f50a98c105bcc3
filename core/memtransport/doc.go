// Package memtransport is an in-memory network of gopherpace transports for
// tests and simulations. Its clock is virtual: nothing happens until the
// caller advances it, so a minute of a five-node cluster under load runs in a
// fraction of a second, the same way every time for a given seed.
//
// The network can delay frames (latency plus uniform jitter, which also
// reorders them), lose and duplicate them at random, cut links between any
// sets of nodes and heal them, and let nodes leave gracefully, crash, and
// come back under the same name.
//
// Limiters built on a memtransport Transport run their gossip timers on the
// network's clock; pass the network's Now to their ...At methods.
package memtransport
