package memberpace

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/pedreviljoen/gopherpace/seeds"
)

// departures tells which members are gone for good rather than silent or
// cut off (gopherpace.GoneReporter). A limiter asks about peers that have
// gone silent; without this it cannot tell a crash from a partition until
// memberlist's failure detector agrees (seconds), and a strict minority
// cannot tell at all. The evidence, and what each piece buys:
//
//   - a connection to the member's gossip port is refused: its host is up
//     and nothing listens there, so its process died (a crash, an OOM
//     kill, a container restarting). A silent member is probed when a
//     limiter first asks (within a tick of its silence, not memberlist's
//     seconds), and again at most every probeEvery while it stays silent.
//     Nothing answers across a partition, and a machine that is down
//     answers nothing either, so neither is taken for gone; nor is a live
//     process that is merely slow, whose port still accepts;
//   - the member left (memberlist's Leave, which Close sends);
//   - the seeds no longer list its address, once memberlist declared it
//     dead, when the seeds list every peer (seeds.Roster: a headless
//     Service's DNS, which drops a pod once it is deleted or unready).
//
// A member that speaks again (a frame after the evidence) or joins again
// is no longer gone.
type departures struct {
	mu       sync.Mutex
	members  map[string]*departure
	inFlight int
	probes   sync.WaitGroup
	ctx      context.Context
	cancel   context.CancelFunc
	closed   bool
	log      func(msg string, args ...any)
}

type departure struct {
	addr     string // the gossip address, "ip:port"
	dead     bool   // memberlist no longer lists it
	deadAt   time.Time
	goneAt   time.Time // when the evidence came; zero: none
	probedAt time.Time
	probing  bool
}

const (
	// probeTimeout bounds one probe: a refusal comes back at once, and
	// anything slower is no evidence.
	probeTimeout = time.Second
	// probeEvery spaces the probes of one silent member.
	probeEvery = time.Second
	// maxProbes caps the probes in flight: in a partition every member
	// across it is silent, and each probe waits out its timeout.
	maxProbes = 16
	// forgetDead is how long a dead member is remembered: far beyond any
	// grace period, so that pods replaced over months leave nothing behind.
	forgetDead = 10 * time.Minute
)

func (d *departures) init(log func(string, ...any)) {
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.members = make(map[string]*departure)
	d.log = log
}

// gone reports the evidence that member is gone for good, with when it
// came (zero: none). A member listed at addr (live: memberlist lists it)
// with no evidence is probed, at most every probeEvery.
func (d *departures) gone(member, addr string, listed bool) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.members[member]
	if m == nil {
		if !listed || d.closed {
			return time.Time{}
		}
		m = &departure{addr: addr}
		d.members[member] = m
	}
	if listed && m.addr != addr {
		*m = departure{addr: addr} // another process under the name
	}
	if m.goneAt.IsZero() && time.Since(m.probedAt) >= probeEvery {
		d.probeLocked(member, m)
	}
	return m.goneAt
}

// spoke forgets the evidence against a member that sent a frame since.
func (d *departures) spoke(member string, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m := d.members[member]; m != nil && !m.goneAt.IsZero() && at.After(m.goneAt) {
		m.goneAt = time.Time{}
	}
}

// joined forgets what was known of a member that is back.
func (d *departures) joined(name string) {
	d.mu.Lock()
	delete(d.members, name)
	d.mu.Unlock()
}

// left records a member memberlist no longer lists: one that left is gone,
// one declared dead is probed. It runs under memberlist's lock, so the
// probe runs apart.
func (d *departures) left(n *memberlist.Node) {
	addr := n.FullAddress().Addr
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	m := d.members[n.Name]
	if m == nil || m.addr != addr {
		m = &departure{addr: addr}
		d.members[n.Name] = m
	}
	m.dead, m.deadAt = true, time.Now()
	if n.State == memberlist.StateLeft {
		if m.goneAt.IsZero() {
			m.goneAt = time.Now()
		}
		return
	}
	d.probeLocked(n.Name, m)
}

// recheck probes every dead member not yet known gone, and with the seeds
// of a provider that lists every peer (nil otherwise), takes one whose
// address they no longer list as gone.
func (d *departures) recheck(listed []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, m := range d.members {
		if m.dead && time.Since(m.deadAt) > forgetDead {
			delete(d.members, name)
			continue
		}
		if !m.dead || !m.goneAt.IsZero() {
			continue
		}
		if listed != nil && !slices.Contains(listed, m.addr) {
			m.goneAt = time.Now()
			d.log("a dead member is gone for good: the seeds no longer list it", "member", name, "addr", m.addr)
			continue
		}
		d.probeLocked(name, m)
	}
}

// unreachable is the addresses of the members memberlist declared dead
// with no evidence that they are gone: cut off, as far as this node can
// tell. The re-join loop joins them every isolatedRejoinInterval, so that
// a partition heals as soon as its links do, on both sides, whatever the
// seeds list (each side holds the other dead, and memberlist gossips with
// the dead only now and then).
func (d *departures) unreachable() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var addrs []string
	for _, m := range d.members {
		if m.dead && m.goneAt.IsZero() && time.Since(m.deadAt) <= forgetDead && !slices.Contains(addrs, m.addr) {
			addrs = append(addrs, m.addr)
		}
	}
	return addrs
}

func (d *departures) probeLocked(name string, m *departure) {
	if d.closed || m.probing || d.inFlight >= maxProbes {
		return
	}
	m.probing, m.probedAt = true, time.Now()
	d.inFlight++
	addr := m.addr
	d.probes.Go(func() {
		dialer := net.Dialer{Timeout: probeTimeout}
		c, err := dialer.DialContext(d.ctx, "tcp", addr)
		if err == nil {
			c.Close() // something listens: no evidence
		}
		refused := errors.Is(err, syscall.ECONNREFUSED)
		d.mu.Lock()
		defer d.mu.Unlock()
		d.inFlight--
		if cur := d.members[name]; cur == m {
			m.probing = false
			if refused && m.goneAt.IsZero() {
				m.goneAt = time.Now()
				d.log("a silent member is gone for good: its gossip port refused a connection", "member", name, "addr", addr)
			}
		}
	})
}

// stop cancels the probes under way and waits for them.
func (d *departures) stop() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.cancel()
	d.probes.Wait()
}

// rosterOf is the seeds' answer when the provider lists every peer, else
// nil: the absence of a member from a partial list says nothing.
func rosterOf(p seeds.Provider, addrs []string) []string {
	if r, ok := p.(seeds.Roster); ok && r.ListsEveryPeer() && len(addrs) > 0 {
		return addrs
	}
	return nil
}
