package datagram

import (
	"math"
	"slices"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// Groups: how a large cluster spreads frames without every node sending
// every frame to every peer (docs/design.md, "Groups").
//
// From GroupsFrom nodes on, over a transport that can send to one member
// (Unicaster), the nodes fall into about √N groups by a hash of their
// names; over a transport that knows its members' zones (Zoner), a
// cluster that spans zones is grouped by zone. A node sends its frames to
// the members of its own group only. Each member passes the frames it
// hears from its group on to other groups: the groups are dealt among the
// members by rank, so that every other group gets the group's frames from
// one member, and the member of that group who receives them spreads them
// inside its group. A frame thus reaches every node in at most three
// hops, and a node sends about 2√N datagrams a tick instead of N − 1. A
// frame of running totals only (no keyed counts, no flag) waits up to
// quietEvery to be passed on, replaced by its origin's next, so that the
// bytes a node sends shrink too; peers heard only through relays are
// given RelaySlack longer before their silence counts (peerView).
//
// Every frame still reaches the engines exactly as its origin sent it, so
// nothing a relay does can make a frame count twice: running totals and
// sequence numbers make a duplicate or a re-routed copy harmless, and a
// lost one is repaired by the origin's next frame. A relay that lies
// about another node is bounded as that node lying itself would be
// (internal/cluster's receiver.go, docs/security.md).

// GroupsFrom is the cluster size, this node included, from which a
// transport's limiters send through groups. Below it every frame goes to
// every peer. With every frame to every peer, a node of the scale
// scenario (R = 1000, offered 10×R) sent 992 datagrams a second at 10
// nodes, 1,016 at 11, 1,462 at 30 and 1,888 at 50 (the bound: 1,000 at
// any N); grouped, 327 to 755 from 11 to 63 nodes, the totals within
// 0.03% (docs/accuracy.md#scale).
const GroupsFrom = 11

// relayReserve is the room a limiter leaves in each frame for the relay
// envelope around it: the envelope's fixed part, the longest origin name
// and the frames' length.
const relayReserve = 5 + wire.MaxOrigin + 3

// groupView is a hub's split of the cluster into groups, made from the
// transport's member list. The zero value is ungrouped.
type groupView struct {
	count int            // groups; 0: not grouped
	mine  int            // this node's group
	mates []string       // the other members of this node's group, by name
	group map[string]int // every member's group
	// others are the other groups' members, by name, indexed by group.
	others [][]string
	// covered are the groups this node passes its group's frames on to.
	covered []int
}

// groupCount is the number of groups for n nodes: about √n, so that a
// group and the number of groups are about the same size.
func groupCount(n int) int { return max(1, int(math.Round(math.Sqrt(float64(n))))) }

// groupOf is the group of the node named name among count groups.
func groupOf(name string, count int) int { return int(wire.NameHash(groupSalt, name) % uint64(count)) }

// hashGroups groups n nodes of one zone by a hash of their names: about
// √n groups from GroupsFrom nodes on, none below.
func hashGroups(n int) (func(string) int, int) {
	if n < GroupsFrom {
		return nil, 0
	}
	count := groupCount(n)
	return func(name string) int { return groupOf(name, count) }, count
}

// zoneGroups groups the nodes by zone when there are two zones or more:
// each zone one group, or √size groups by hash once it holds zoneSplitFrom
// nodes; the groups are numbered in the order of the zones' names, so
// that every node numbers them alike.
func zoneGroups(self string, members []string, zone func(string) string) (func(string) int, int, bool) {
	size := map[string]int{zone(self): 1}
	for _, m := range members {
		if m != self {
			size[zone(m)]++
		}
	}
	if len(size) < 2 {
		return nil, 0, false
	}
	zones := make([]string, 0, len(size))
	for z := range size {
		zones = append(zones, z)
	}
	slices.Sort(zones)
	first, split := make(map[string]int, len(zones)), make(map[string]int, len(zones))
	count := 0
	for _, z := range zones {
		first[z], split[z] = count, 1
		if size[z] >= zoneSplitFrom {
			split[z] = groupCount(size[z])
		}
		count += split[z]
	}
	return func(name string) int {
		z := zone(name)
		return first[z] + groupOf(name, split[z])
	}, count, true
}

// zoneSplitFrom is the zone size from which a zone splits into groups by
// hash: a zone is one group below it.
const zoneSplitFrom = 64

// groupSalt keeps the groups' hash apart from keys' and limiter IDs'.
const groupSalt = 0x67726f7570 // "group"

// GroupOf is the group of the node named name in a cluster of n nodes
// without zones.
func GroupOf(name string, n int) int { return groupOf(name, groupCount(n)) }

// newGroupView splits self and members into groups, or returns the
// ungrouped view when a name (any node's) is too long to carry in a relay
// envelope, or when there are fewer than GroupsFrom nodes in one zone.
// zone, when not nil, is each node's zone (Zoner): with two zones or
// more, the groups follow them, whatever N.
func newGroupView(self string, members []string, zone func(string) string) groupView {
	n := 1 + len(members)
	if len(self) > wire.MaxOrigin || len(self) == 0 {
		return groupView{}
	}
	for _, m := range members {
		if len(m) > wire.MaxOrigin || len(m) == 0 {
			// A node whose frames no envelope can carry would be heard by
			// its own group only: every node broadcasts instead, and
			// every node sees the same names, so all agree.
			return groupView{}
		}
	}
	groupOf, count := hashGroups(n)
	if zone != nil {
		if zg, zc, ok := zoneGroups(self, members, zone); ok {
			groupOf, count = zg, zc
		}
	}
	if groupOf == nil {
		return groupView{}
	}
	v := groupView{count: count, group: make(map[string]int, n)}
	v.others = make([][]string, v.count)
	v.mine = groupOf(self)
	for _, m := range members {
		if m == self {
			continue
		}
		g := groupOf(m)
		v.group[m] = g
		if g == v.mine {
			v.mates = append(v.mates, m)
		} else {
			v.others[g] = append(v.others[g], m)
		}
	}
	slices.Sort(v.mates)
	for g := range v.others {
		slices.Sort(v.others[g])
	}
	v.cover(self, func(string) bool { return true })
	return v
}

// cover deals the other groups, counted from this one, to the members of
// this node's group that alive reports, by rank (by name): the member of
// rank r among size covers the (1 + r)th, the (1 + size + r)th... A
// member that is silent (crashed, cut off, idle) covers nothing, so that
// its share of the groups moves to the others within a tick of every
// member noticing, instead of going unheard until the failure detector
// drops it.
func (v *groupView) cover(self string, alive func(string) bool) {
	rank, size := 0, 1
	for _, m := range v.mates {
		if !alive(m) {
			continue
		}
		size++
		if m < self {
			rank++
		}
	}
	v.covered = v.covered[:0]
	for d := 1 + rank; d < v.count; d += size {
		v.covered = append(v.covered, (v.mine+d)%v.count)
	}
}

// grouped reports whether the view splits the cluster.
func (v *groupView) grouped() bool { return v.count > 0 }

// isMate reports whether name is in this node's group.
func (v *groupView) isMate(name string) bool {
	g, ok := v.group[name]
	return ok && g == v.mine
}

// relayTargets appends to dst one member of each covered group, turning
// with turn so that the relays meant for a group are spread over its
// members; a member that alive says is silent (crashed, cut off) is
// passed over while any of its group is heard.
func (v *groupView) relayTargets(dst []string, turn uint64, alive func(string) bool) []string {
	for _, g := range v.covered {
		ms := v.others[g]
		if len(ms) == 0 {
			continue
		}
		start := (uint64(v.mine) + turn) % uint64(len(ms))
		pick := ms[start]
		for i := range uint64(len(ms)) {
			if m := ms[(start+i)%uint64(len(ms))]; alive(m) {
				pick = m
				break
			}
		}
		dst = append(dst, pick)
	}
	return dst
}
