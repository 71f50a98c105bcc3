package datagram

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func names(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// Every node, from its own view of the same member list, puts every node
// in the same group; groups are about √N strong; and for every group and
// every other group exactly one member of the first covers the second, so
// that a group's frames reach every other group once.
func TestGroupsCoverEveryGroupOnce(t *testing.T) {
	for _, n := range []int{GroupsFrom, 30, 64, 100, 300, 1000} {
		all := names(n, "pod-abcdef")
		views := make(map[string]groupView, n)
		for i, self := range all {
			others := slices.Delete(slices.Clone(all), i, i+1)
			views[self] = newGroupView(self, others, nil)
		}
		count := views[all[0]].count
		if want := int(math.Round(math.Sqrt(float64(n)))); count != want {
			t.Fatalf("N = %d: %d groups, want %d", n, count, want)
		}
		sizes := make([]int, count)
		for _, self := range all {
			v := views[self]
			sizes[v.mine]++
			for _, m := range v.mates {
				if views[m].mine != v.mine {
					t.Fatalf("N = %d: %s counts %s a mate, which is in group %d, not %d", n, self, m, views[m].mine, v.mine)
				}
			}
		}
		mean := float64(n) / float64(count)
		for g, size := range sizes {
			// A hash splits a few dozen names unevenly: at 11 nodes, a
			// group of one beside groups of five. The bounds hold from 64.
			if n >= 64 && (float64(size) < mean/3 || float64(size) > mean*2) {
				t.Errorf("N = %d: group %d has %d members; the mean is %.1f", n, g, size, mean)
			}
		}
		covers := make(map[[2]int]int)
		for _, self := range all {
			v := views[self]
			for _, g := range v.covered {
				if g == v.mine {
					t.Fatalf("N = %d: %s covers its own group", n, self)
				}
				covers[[2]int{v.mine, g}]++
			}
			if targets := v.relayTargets(nil, 3, func(string) bool { return true }); len(targets) != len(v.covered) {
				t.Fatalf("N = %d: %s covers %d groups and has %d targets", n, self, len(v.covered), len(targets))
			}
		}
		for a := range count {
			for b := range count {
				if a != b && sizes[a] > 0 && sizes[b] > 0 && covers[[2]int{a, b}] != 1 {
					t.Fatalf("N = %d: group %d covered by %d members of group %d", n, b, covers[[2]int{a, b}], a)
				}
			}
		}
	}
}

// A relay target turns with each flush over the members of its group.
func TestRelayTargetsTurn(t *testing.T) {
	all := names(100, "n")
	v := newGroupView(all[0], all[1:], nil)
	seen := map[string]bool{}
	for turn := range uint64(50) {
		for _, target := range v.relayTargets(nil, turn, func(string) bool { return true }) {
			if v.group[target] == v.mine {
				t.Fatalf("a relay target %s is in this node's own group", target)
			}
			seen[target] = true
		}
	}
	if len(v.covered) > 0 && len(seen) < 2*len(v.covered) {
		t.Fatalf("%d targets over 50 turns for %d covered groups: they do not turn", len(seen), len(v.covered))
	}
	// A silent member is passed over while another of its group is heard.
	silent := v.others[v.covered[0]][0]
	for turn := range uint64(50) {
		if got := v.relayTargets(nil, turn, func(m string) bool { return m != silent }); got[0] == silent {
			t.Fatalf("turn %d: the silent member %s is a relay target", turn, silent)
		}
	}
}

// Below GroupsFrom nodes, or with any name too long for an envelope,
// every frame goes to every peer.
func TestSmallClustersAreNotGrouped(t *testing.T) {
	all := names(GroupsFrom-1, "n")
	if v := newGroupView(all[0], all[1:], nil); v.grouped() {
		t.Fatalf("%d nodes are grouped", GroupsFrom-1)
	}
	long := strings.Repeat("x", 256)
	all = names(200, "n")
	if v := newGroupView(long, all, nil); v.grouped() {
		t.Fatal("a node whose name an envelope cannot carry groups itself")
	}
	if v := newGroupView(all[0], append(all[1:], long), nil); v.grouped() {
		t.Fatal("a cluster with a member whose name an envelope cannot carry is grouped: that member's frames could not be relayed")
	}
}

// With two zones or more the groups follow them, at any N: each zone is a
// group, split by hash once it holds zoneSplitFrom nodes; every node agrees.
func TestGroupsFollowZones(t *testing.T) {
	zoneOf := func(name string) string {
		var i int
		fmt.Sscanf(name, "n-%d", &i)
		switch {
		case i < 20:
			return "east"
		case i < 40:
			return "west"
		}
		return "central" // 100 nodes: split
	}
	for _, n := range []int{40, 140} {
		all := names(n, "n")
		views := make(map[string]groupView, n)
		for i, self := range all {
			views[self] = newGroupView(self, slices.Delete(slices.Clone(all), i, i+1), zoneOf)
		}
		wantCount := 2
		if n == 140 {
			wantCount = 2 + groupCount(100)
		}
		for _, self := range all {
			v := views[self]
			if !v.grouped() || v.count != wantCount {
				t.Fatalf("N = %d: %s sees %d groups, want %d", n, self, v.count, wantCount)
			}
			for _, m := range v.mates {
				if zoneOf(m) != zoneOf(self) {
					t.Fatalf("N = %d: %s (%s) has a mate %s in %s", n, self, zoneOf(self), m, zoneOf(m))
				}
				if views[m].mine != v.mine {
					t.Fatalf("N = %d: %s and %s disagree on their group", n, self, m)
				}
			}
			if zoneOf(self) != "central" && len(v.mates) != 19 {
				t.Fatalf("N = %d: %s has %d mates, want its whole zone (19)", n, self, len(v.mates))
			}
		}
	}
	// One zone, or none known: grouped by N alone, as without zones.
	all := names(40, "n")
	one := newGroupView(all[0], all[1:], func(string) string { return "one" })
	if none := newGroupView(all[0], all[1:], nil); one.count != none.count || one.mine != none.mine || !slices.Equal(one.mates, none.mates) {
		t.Fatalf("40 nodes of one zone: %d groups, mates %v; without zones %d, %v", one.count, one.mates, none.count, none.mates)
	}
}
