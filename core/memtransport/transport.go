package memtransport

import (
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/transportkit"
)

// Transport is one node's attachment to a Network. It implements
// gopherpace.Transport and transportkit.Clock.
type Transport struct {
	net       *Network
	name      string
	alive     bool // guarded by net.mu
	crashed   bool
	crashedAt time.Time
	hostDown  bool // crashed with its machine: nothing answers for it

	receivers transportkit.Receivers
}

var (
	_ gopherpace.Transport       = (*Transport)(nil)
	_ gopherpace.Unicaster       = (*Transport)(nil)
	_ gopherpace.Zoner           = (*Transport)(nil)
	_ gopherpace.KeyHashSecreter = (*Transport)(nil)
	_ gopherpace.GoneReporter    = (*Transport)(nil)
	_ transportkit.Clock         = (*Transport)(nil)
)

// Name is the node's name.
func (t *Transport) Name() string { return t.name }

// Broadcast schedules frame for delivery to every other live node, subject
// to the network's latency, loss, duplication and cuts. It never delivers
// synchronously.
func (t *Transport) Broadcast(frame []byte) error { return t.net.broadcast(t, frame) }

// SendTo schedules frame for delivery to the node named member alone,
// subject to the same latency, loss, duplication and cuts as Broadcast.
func (t *Transport) SendTo(member string, frame []byte) error { return t.net.sendTo(t, member, frame) }

// KeyHashSecret is the network's key hash secret, the same for every
// node on it (WithKeyHashSecret, or DefaultKeyHashSecret).
func (t *Transport) KeyHashSecret() []byte { return t.net.secret }

// Zone is member's zone, as the network's WithZones gives it ("" without).
func (t *Transport) Zone(member string) string {
	if t.net.zone == nil {
		return ""
	}
	return t.net.zone(member)
}

// Subscribe registers a receiver for frames from peers.
func (t *Transport) Subscribe(receive func(from string, frame []byte)) func() {
	return t.receivers.Subscribe(receive)
}

// Members lists the other live nodes, plus crashed ones until the network's
// failure detection notices them.
func (t *Transport) Members() []string {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	if !t.alive {
		return nil
	}
	return t.net.membersLocked(t)
}

// MaxFrameSize is the network's frame size limit.
func (t *Transport) MaxFrameSize() int {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	return t.net.maxFrame
}

// Now is the network's virtual time.
func (t *Transport) Now() time.Time { return t.net.Now() }

// AfterFunc schedules f on the network's clock.
func (t *Transport) AfterFunc(d time.Duration, f func()) func() bool { return t.net.AfterFunc(d, f) }

// Close leaves the network gracefully: peers stop listing the node at once.
func (t *Transport) Close() error {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	t.alive = false
	return nil
}

// Crash stops the node's process without a goodbye: nothing more is sent
// or delivered, and peers keep listing it until failure detection
// notices. Its host stays up, so a peer that can reach it finds nothing
// listening there and reports it gone at once (Gone), as memberpace does
// when a connection to a silent member's port is refused.
func (t *Transport) Crash() { t.crash(false) }

// CrashHost stops the node as Crash does, with the machine it ran on: no
// connection to it is answered, so nothing tells its peers that it is
// gone rather than cut off from them (a Kubernetes node failure).
func (t *Transport) CrashHost() { t.crash(true) }

func (t *Transport) crash(host bool) {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	if t.alive {
		t.alive, t.crashed, t.crashedAt, t.hostDown = false, true, t.net.nowLocked(), host
	}
}

// Gone reports whether member crashed (Crash, not CrashHost) and is not
// cut off from this node: a probe of its port would be refused.
func (t *Transport) Gone(member string) bool {
	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	m := n.nodes[member]
	return m != nil && m.crashed && !m.hostDown && !n.isCut(t.name, member)
}

func (t *Transport) deliver(from string, frame []byte) {
	t.net.mu.Lock()
	alive := t.alive && t.net.nodes[t.name] == t
	t.net.mu.Unlock()
	if alive {
		t.receivers.Deliver(from, frame)
	}
}
