// Package memberpace carries gopherpace's gossip over hashicorp/memberlist:
// real UDP datagrams between the replicas of a service, with SWIM membership
// to say who they are.
//
//	tr, err := memberpace.New(memberpace.WithSeeds(seeds.DNS{Host: "myservice-headless", Port: 7946}))
//	if err != nil { ... }
//	defer tr.Close()
//	limiter, err := gopherpace.New(gopherpace.WithRefillRate(1000), gopherpace.WithTransport(tr))
//	defer limiter.Close() // before tr.Close
//
// Frames go to every member, one datagram each, never blocking on a dead
// or slow peer; from 64 members the limiters send to their group only and
// relay between groups, through SendTo. Give each replica its zone
// (WithZone) when a cluster spans zones or regions: frames then cross
// between zones once, not once per replica. memberlist's own partition handling never
// re-merges a split cluster, so a background loop asks the seed provider
// again and re-joins every RejoinInterval, and every second while this node
// hears no peer; it also joins, every second, the members memberlist
// declared dead without evidence that they are gone, so that a healed
// partition merges again within about a second whatever the seeds list. A node whose first join fails starts anyway and keeps trying.
//
// Logs go to slog with component=memberlist; memberlist's routine noise is
// demoted to debug.
package memberpace
