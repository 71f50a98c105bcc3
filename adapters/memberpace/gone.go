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

// departures tells, of the members memberlist has declared dead, which
// are gone for good rather than cut off (gopherpace.GoneReporter). A
// limiter that sees a strict minority of its cluster cannot otherwise
// tell the others' crash from a partition. The evidence, and what each
// piece buys:
//
//   - the member left (memberlist's Leave, which Close sends): gone at
//     once, as its goodbye frame already says;
//   - a connection to its gossip port is refused: its host is up and
//     nothing listens there, so its process died (a crash, an OOM kill,
//     a container restarting). Nothing answers across a partition, and a
//     machine that is down answers nothing either, so neither is taken
//     for gone. Probed when memberlist declares it dead, and again on
//     every re-join round while it stays dead;
//   - the seeds no longer list its address, when the seeds list every
//     peer (seeds.Roster: a headless Service's DNS, which drops a pod
//     once it is deleted or no longer ready).
//
// A member that joins again is no longer gone.
type departures struct {
	mu     sync.Mutex
	dead   map[string]departed
	probes sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
	closed bool
	log    func(msg string, args ...any)
}

type departed struct {
	addr    string // the gossip address, "ip:port"
	gone    bool
	probing bool
}

// probeTimeout bounds one probe of a dead member's port: a refusal comes
// back at once, and anything slower is no evidence.
const probeTimeout = time.Second

func (d *departures) init(log func(string, ...any)) {
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.dead = make(map[string]departed)
	d.log = log
}

// Gone reports whether the member named member is known to be gone for
// good.
func (d *departures) Gone(member string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dead[member].gone
}

// joined forgets what was known of a member that is back.
func (d *departures) joined(name string) {
	d.mu.Lock()
	delete(d.dead, name)
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
	d.dead[n.Name] = departed{addr: addr, gone: n.State == memberlist.StateLeft}
	if n.State != memberlist.StateLeft {
		d.probeLocked(n.Name)
	}
}

// recheck probes every dead member not yet known gone, and with the seeds
// of a provider that lists every peer (nil otherwise), takes one whose
// address they no longer list as gone.
func (d *departures) recheck(listed []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	for name, m := range d.dead {
		if m.gone {
			continue
		}
		if listed != nil && !slices.Contains(listed, m.addr) {
			m.gone = true
			d.dead[name] = m
			d.log("a dead member is gone for good: the seeds no longer list it", "member", name, "addr", m.addr)
			continue
		}
		d.probeLocked(name)
	}
}

func (d *departures) probeLocked(name string) {
	m := d.dead[name]
	if m.probing || m.gone {
		return
	}
	m.probing = true
	d.dead[name] = m
	d.probes.Go(func() {
		dialer := net.Dialer{Timeout: probeTimeout}
		c, err := dialer.DialContext(d.ctx, "tcp", m.addr)
		if err == nil {
			c.Close() // something listens: no evidence
		}
		refused := errors.Is(err, syscall.ECONNREFUSED)
		d.mu.Lock()
		defer d.mu.Unlock()
		cur, ok := d.dead[name]
		if !ok || cur.addr != m.addr {
			return // back, or dead again elsewhere, meanwhile
		}
		cur.probing = false
		if refused && !cur.gone {
			cur.gone = true
			d.log("a dead member is gone for good: its port refused a connection", "member", name, "addr", m.addr)
		}
		d.dead[name] = cur
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
