package memberpace

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/transportkit"
)

// Transport is a gopherpace.Transport over memberlist. Close it after the
// limiters that use it.
type Transport struct {
	ml    *memberlist.Memberlist
	cfg   config
	name  string
	log   *slog.Logger
	inbox chan inbound
	done  chan struct{}
	// keyring is memberlist's, for rotation; nil without encryption.
	keyring *memberlist.Keyring
	logw    *logWriter

	receivers transportkit.Receivers
	book      addressBook // peers' addresses, for sending (addressbook.go)
	departed  departures  // which dead members are gone for good (gone.go)

	refused   refusal      // whether the seeds refused this node (refusal.go)
	lastFrame atomic.Int64 // unix ns of the last frame from any peer
	heardMu   sync.Mutex
	heard     map[string]time.Time // last frame per peer name
	stats     struct {
		sent, sendErrors, received, dropped, malformed, joins, joinErrors atomic.Uint64
	}

	stop         context.CancelFunc
	rejoinDone   sync.WaitGroup
	dispatchDone sync.WaitGroup
	closeOnce    sync.Once
	closeErr     error
}

type inbound struct {
	from  string
	frame []byte
}

var (
	_ gopherpace.Transport       = (*Transport)(nil)
	_ gopherpace.Unicaster       = (*Transport)(nil)
	_ gopherpace.Zoner           = (*Transport)(nil)
	_ gopherpace.KeyHashSecreter = (*Transport)(nil)
	_ gopherpace.JoinReporter    = (*Transport)(nil)
	_ gopherpace.GoneReporter    = (*Transport)(nil)
)

// New starts memberlist, makes a first attempt to join the seeds (bounded
// by the join timeout; a failure is logged and retried, not returned), and
// starts the re-join loop.
func New(opts ...Option) (*Transport, error) {
	c := defaults()
	for _, o := range opts {
		if o == nil {
			return nil, errNoConfig
		}
		o(&c)
	}
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	exposed, err := c.checkExposure()
	if err != nil {
		return nil, err
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.nodeName == "" {
		c.nodeName = defaultNodeName()
	}
	t := &Transport{
		cfg:   c,
		name:  c.nodeName,
		log:   c.logger.With("component", "memberlist"),
		inbox: make(chan inbound, c.queue),
		done:  make(chan struct{}),
		heard: make(map[string]time.Time),
	}
	t.departed.init(func(msg string, args ...any) { t.log.Info(msg, append(args, "node", t.name)...) })
	mc, err := t.memberlistConfig()
	if err != nil {
		return nil, err
	}
	t.keyring = mc.Keyring
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("memberpace: starting memberlist: %w", err)
	}
	t.ml = ml
	ctx, cancel := context.WithCancel(context.Background())
	t.stop = cancel
	t.dispatchDone.Add(1)
	go t.dispatch()
	if c.seeds != nil {
		t.joinSeeds(ctx)
		t.rejoinDone.Add(1)
		go t.rejoinLoop(ctx)
	}
	t.log.Info("gossip transport started", "node", t.name, "addr", t.GossipAddr(), "members", ml.NumMembers())
	if exposed {
		t.log.Warn("gossip is not encrypted: anyone who can reach the gossip port can report admits to this cluster (WithPlaintext)",
			"node", t.name, "addr", t.GossipAddr())
	}
	return t, nil
}

func defaultNodeName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "gopherpace"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

func (t *Transport) memberlistConfig() (*memberlist.Config, error) {
	c := &t.cfg
	var mc *memberlist.Config
	switch c.profile {
	case ProfileWAN:
		mc = memberlist.DefaultWANConfig()
	case ProfileFast:
		mc = memberlist.DefaultLANConfig()
		mc.ProbeInterval, mc.ProbeTimeout = 200*time.Millisecond, 100*time.Millisecond
		mc.SuspicionMult, mc.SuspicionMaxTimeoutMult = 3, 2
		mc.GossipInterval = 50 * time.Millisecond
		mc.TCPTimeout = 500 * time.Millisecond
		mc.PushPullInterval = 5 * time.Second
		mc.GossipToTheDeadTime = 5 * time.Second
	default:
		mc = memberlist.DefaultLANConfig()
		// Probe twice as often as memberlist's LAN default, and suspect
		// for 3 intervals rather than 4, so that a crashed member is
		// declared dead 2.3-2.8 s after the crash (up to 10 nodes; the
		// suspicion grows with log10 N) rather than 5-6 s: the limiter
		// gives a crashed node's share back to the survivors once
		// memberlist agrees it is gone (docs/operations.md). A live member
		// wrongly suspected refutes it when the suspicion reaches it.
		mc.ProbeInterval, mc.ProbeTimeout = 500*time.Millisecond, 250*time.Millisecond
		mc.SuspicionMult, mc.SuspicionMaxTimeoutMult = 3, 3
		mc.TCPTimeout = 2 * time.Second
	}
	mc.TCPTimeout = min(mc.TCPTimeout, c.joinTimeout)
	mc.Name = c.nodeName
	mc.BindAddr, mc.BindPort = c.bindAddr, c.bindPort
	if c.advertiseAddr != "" {
		mc.AdvertiseAddr, mc.AdvertisePort = c.advertiseAddr, c.advertisePort
	} else {
		mc.AdvertisePort = c.bindPort
	}
	mc.Delegate = delegate{t}
	t.logw = newLogWriter(t.log)
	mc.Logger = log.New(t.logw, "", 0)
	mc.Label = c.label
	if len(c.keys) > 0 {
		kr, err := memberlist.NewKeyring(c.keys, c.keys[0])
		if err != nil {
			return nil, fmt.Errorf("memberpace: %w", err)
		}
		mc.Keyring = kr
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	if c.tweak != nil {
		c.tweak(mc)
	}
	t.book.next = mc.Events
	t.book.departures = &t.departed
	mc.Events = &t.book
	return mc, nil
}

// Name is this node's name in the cluster.
func (t *Transport) Name() string { return t.name }

// GossipAddr is the "ip:port" peers use to reach this node: give it to
// other nodes' seeds when the port was OS-assigned.
func (t *Transport) GossipAddr() string {
	n := t.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Keyring is memberlist's keyring, for key rotation, or nil without
// encryption.
func (t *Transport) Keyring() *memberlist.Keyring { return t.keyring }

// KeyHashSecret is the secret the limiters on this transport hash keys
// with (gopherpace.KeyHashSecreter): derived from the primary gossip key
// the transport was created with (HMAC-SHA256 of a fixed label), so every
// node that shares that key names keys alike and nobody without it can
// compute the names; nil with plaintext gossip. A key installed later
// through Keyring does not change it: after a rotation, restart the nodes
// (one at a time) so that each derives it from the new key; until then a
// node started with the new key and one started with the old drop each
// other's keyed counts, and say so at ERROR.
func (t *Transport) KeyHashSecret() []byte {
	if len(t.cfg.keys) == 0 {
		return nil
	}
	mac := hmac.New(sha256.New, t.cfg.keys[0])
	mac.Write([]byte("gopherpace key hash secret"))
	return mac.Sum(nil)
}

// MaxFrameSize leaves room in one datagram for the sender's name.
func (t *Transport) MaxFrameSize() int { return MaxDatagram - 1 - len(t.name) }

// Broadcast sends frame to every other member in one UDP datagram each.
// It never blocks on a peer: UDP sends do not wait for anyone.
func (t *Transport) Broadcast(frame []byte) error {
	msg, err := t.message(frame)
	if err != nil {
		return err
	}
	var firstErr error
	var buf [16]memberlist.Address
	for _, a := range t.book.appendPeers(buf[:0], t.name) {
		if err := t.ml.SendToAddress(a, msg); err != nil {
			t.stats.sendErrors.Add(1)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		t.stats.sent.Add(1)
	}
	return firstErr
}

// SendTo sends frame to the member named member alone, in one UDP
// datagram; a name memberlist does not know is no error (the frame is
// lost, as a datagram to a node that just left would be). The limiters
// of a large cluster send through groups with it (docs/design.md,
// "Groups").
func (t *Transport) SendTo(member string, frame []byte) error {
	msg, err := t.message(frame)
	if err != nil {
		return err
	}
	a, ok := t.book.address(member)
	if !ok || member == t.name {
		return nil
	}
	if err := t.ml.SendToAddress(a, msg); err != nil {
		t.stats.sendErrors.Add(1)
		return err
	}
	t.stats.sent.Add(1)
	return nil
}

// message is frame behind this node's name, as peers read it.
func (t *Transport) message(frame []byte) ([]byte, error) {
	if len(frame) > t.MaxFrameSize() {
		return nil, fmt.Errorf("memberpace: frame of %d bytes exceeds %d", len(frame), t.MaxFrameSize())
	}
	msg := make([]byte, 0, 1+len(t.name)+len(frame))
	msg = append(msg, byte(len(t.name)))
	msg = append(msg, t.name...)
	return append(msg, frame...), nil
}

// Subscribe registers a receiver for frames from peers.
func (t *Transport) Subscribe(receive func(from string, frame []byte)) func() {
	return t.receivers.Subscribe(receive)
}

// Members lists the other nodes memberlist believes alive (suspects
// included, as memberlist reports them).
func (t *Transport) Members() []string {
	nodes := t.ml.Members()
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if n.Name != t.name {
			names = append(names, n.Name)
		}
	}
	return names
}

// MemberAddrs are the addresses the other members gossip from, by name:
// where their other services (a status page, say) listen, at their own
// ports. Members come and go; a member memberlist has not confirmed yet
// may be missing.
func (t *Transport) MemberAddrs() map[string]netip.Addr {
	nodes := t.ml.Members()
	out := make(map[string]netip.Addr, len(nodes))
	for _, n := range nodes {
		if n.Name == t.name {
			continue
		}
		if a, ok := netip.AddrFromSlice(n.Addr); ok {
			out[n.Name] = a.Unmap()
		}
	}
	return out
}

// Stats counts this transport's traffic.
type Stats struct {
	// DatagramsSent and SendErrors count per-peer sends.
	DatagramsSent, SendErrors uint64
	// FramesReceived counts frames queued for the limiters; FramesDropped,
	// frames dropped because the queue was full; FramesMalformed, datagrams
	// without a valid sender prefix.
	FramesReceived, FramesDropped, FramesMalformed uint64
	// Joins and JoinErrors count join attempts to single seeds.
	Joins, JoinErrors uint64
	// MemberlistErrors counts memberlist's warnings and errors, such as
	// datagrams it could not decode or decrypt; LogRecordsSuppressed, the
	// records of them not logged because one of the same kind was logged
	// less than 10 s before.
	MemberlistErrors, LogRecordsSuppressed uint64
	// Members is memberlist's count of live nodes, this one included.
	Members int
}

// Stats returns a snapshot of the counters.
func (t *Transport) Stats() Stats {
	return Stats{
		DatagramsSent: t.stats.sent.Load(), SendErrors: t.stats.sendErrors.Load(),
		FramesReceived: t.stats.received.Load(), FramesDropped: t.stats.dropped.Load(),
		FramesMalformed: t.stats.malformed.Load(),
		Joins:           t.stats.joins.Load(), JoinErrors: t.stats.joinErrors.Load(),
		MemberlistErrors: t.logw.errors.Load(), LogRecordsSuppressed: t.logw.suppressed.Load(),
		Members: t.ml.NumMembers(),
	}
}

// Gone reports whether member, a peer that has gone silent, is known to
// be gone for good: its gossip port refused a connection (its process
// died), it left, or seeds that list every peer no longer list it once
// memberlist declared it dead (gone.go). The first ask about a silent
// member starts a probe of its port; a frame from it since the evidence
// makes it not gone. A limiter stops counting a member gone for good at
// once, whatever share of the cluster it sees.
func (t *Transport) Gone(member string) bool {
	addr, listed := t.book.address(member)
	at := t.departed.gone(member, addr.Addr, listed)
	if at.IsZero() {
		return false
	}
	t.heardMu.Lock()
	last := t.heard[member]
	t.heardMu.Unlock()
	if last.After(at) {
		t.departed.spoke(member, last)
		return false
	}
	return true
}

// Close stops the re-join loop, leaves the cluster (so peers drop this node
// at once), shuts memberlist down and stops delivering frames. It is
// idempotent.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.stop()
		// The re-join loop must be gone before Leave: a join after Leave
		// would be refused, and Leave after Shutdown panics.
		t.rejoinDone.Wait()
		if err := t.ml.Leave(2 * time.Second); err != nil {
			t.log.Debug("leave", "err", err)
		}
		t.logw.closing.Store(true)
		t.closeErr = t.ml.Shutdown()
		t.departed.stop()
		// memberlist's packet goroutine may still be finishing a NotifyMsg,
		// so the inbox stays open; the dispatcher stops on done instead.
		close(t.done)
		t.dispatchDone.Wait()
		t.log.Info("gossip transport stopped", "node", t.name)
	})
	return t.closeErr
}

// dispatch hands queued frames to the subscribers, off memberlist's packet
// goroutine.
func (t *Transport) dispatch() {
	defer t.dispatchDone.Done()
	for {
		select {
		case <-t.done:
			return
		case in := <-t.inbox:
			t.heardMu.Lock()
			t.heard[in.from] = time.Now()
			t.heardMu.Unlock()
			t.receivers.Deliver(in.from, in.frame)
		}
	}
}

// delegate receives memberlist's user messages.
type delegate struct{ t *Transport }

// NodeMeta announces this node's zone (WithZone) to every member.
func (d delegate) NodeMeta(limit int) []byte {
	if d.t.cfg.zone == "" {
		return nil
	}
	meta := append([]byte(metaZone), d.t.cfg.zone...)
	if len(meta) > limit {
		return nil // cannot happen: the zone is at most 255 bytes, the limit 512
	}
	return meta
}

// metaZone starts a node's metadata when it carries a zone, so that
// metadata of another kind (another release's) is not taken for one.
const metaZone = "gpz1:"

// zoneOf reads a zone from a node's metadata.
func zoneOf(meta []byte) string {
	if len(meta) <= len(metaZone) || string(meta[:len(metaZone)]) != metaZone {
		return ""
	}
	return string(meta[len(metaZone):])
}

// Zone is the zone of the member named member as it announced it
// (WithZone), this node's own included; "" when it announced none.
func (t *Transport) Zone(member string) string {
	if member == t.name {
		return t.cfg.zone
	}
	return t.book.zone(member)
}
func (delegate) GetBroadcasts(int, int) [][]byte     { return nil }
func (delegate) LocalState(bool) []byte              { return nil }
func (delegate) MergeRemoteState(buf []byte, _ bool) {}

// NotifyMsg splits off the sender's name and queues the frame, dropping it
// when the queue is full: it runs on memberlist's only packet goroutine and
// must never block.
func (d delegate) NotifyMsg(msg []byte) {
	t := d.t
	if len(msg) < 2 || int(msg[0]) == 0 || len(msg) < 1+int(msg[0]) {
		t.stats.malformed.Add(1)
		return
	}
	n := int(msg[0])
	in := inbound{from: string(msg[1 : 1+n]), frame: append([]byte(nil), msg[1+n:]...)}
	select {
	case t.inbox <- in:
		t.stats.received.Add(1)
		t.lastFrame.Store(time.Now().UnixNano())
	default:
		t.stats.dropped.Add(1)
	}
}

// Metrics reports the transport's counters and gauges by name, for
// metrics exporters that must not import this package (prompace): the
// counters of Stats in snake case, and the gauge "members".
func (t *Transport) Metrics() (counters, gauges map[string]uint64) {
	s := t.Stats()
	return map[string]uint64{
			"datagrams_sent": s.DatagramsSent, "send_errors": s.SendErrors,
			"frames_received": s.FramesReceived, "frames_dropped": s.FramesDropped, "frames_malformed": s.FramesMalformed,
			"joins": s.Joins, "join_errors": s.JoinErrors,
			"memberlist_errors": s.MemberlistErrors, "log_records_suppressed": s.LogRecordsSuppressed,
		}, map[string]uint64{
			"members": uint64(s.Members),
		}
}
