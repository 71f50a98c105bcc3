package memberpace

import (
	"sync"

	"github.com/hashicorp/memberlist"
)

// addressBook keeps every peer's address as memberlist last announced it.
// memberlist's Members returns pointers into its own state, which it
// rewrites as nodes rejoin: reading a node's address from them after the
// call races with those writes. Its event callbacks run while it holds
// its lock, so the addresses copied there are consistent.
type addressBook struct {
	mu    sync.RWMutex
	addrs map[string]memberlist.Address
	zones map[string]string        // each member's zone, from its metadata
	next  memberlist.EventDelegate // the configuration's own, if any
	// departures learns who joined and who left or died (gone.go).
	departures *departures
}

func (b *addressBook) set(n *memberlist.Node) {
	b.mu.Lock()
	if b.addrs == nil {
		b.addrs, b.zones = make(map[string]memberlist.Address), make(map[string]string)
	}
	b.addrs[n.Name] = n.FullAddress()
	b.zones[n.Name] = zoneOf(n.Meta)
	b.mu.Unlock()
}

func (b *addressBook) NotifyJoin(n *memberlist.Node) {
	b.set(n)
	if b.departures != nil {
		b.departures.joined(n.Name)
	}
	if b.next != nil {
		b.next.NotifyJoin(n)
	}
}

func (b *addressBook) NotifyUpdate(n *memberlist.Node) {
	b.set(n)
	if b.next != nil {
		b.next.NotifyUpdate(n)
	}
}

func (b *addressBook) NotifyLeave(n *memberlist.Node) {
	b.mu.Lock()
	delete(b.addrs, n.Name)
	delete(b.zones, n.Name)
	b.mu.Unlock()
	if b.departures != nil {
		b.departures.left(n)
	}
	if b.next != nil {
		b.next.NotifyLeave(n)
	}
}

// appendPeers appends every address but self's to dst.
func (b *addressBook) appendPeers(dst []memberlist.Address, self string) []memberlist.Address {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for name, a := range b.addrs {
		if name != self {
			dst = append(dst, a)
		}
	}
	return dst
}

// address is the address of the member named name, if the book has it.
func (b *addressBook) address(name string) (memberlist.Address, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	a, ok := b.addrs[name]
	return a, ok
}

// zone is the zone of the member named name, "" if the book has none.
func (b *addressBook) zone(name string) string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.zones[name]
}
