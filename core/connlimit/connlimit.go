// Package connlimit caps the connections a listener holds, in all and per
// client address, so that no client can hold a server's port: one that
// opens connections and leaves them idle, or keeps them busy with calls
// that never finish, costs itself its own connections, not every other
// client theirs.
//
// A new connection is taken unless its own client is at its cap with
// nothing idle, or the listener is full and its client already holds as
// many as any other. To make room, the listener closes (reclaims) one
// connection:
//
//  1. at the client's own cap: that client's connection idle the longest;
//  2. at the total cap: the connection idle the longest, if it has been
//     idle for a second (a new connection counts as idle from its accept,
//     and the second lets it send its first call); failing that, the
//     connection of the client holding the most, idle the longest or else
//     its oldest, when that client holds more than the newcomer's.
//
// So a flood of connections from one address never costs another client
// anything, and a flood from many costs the idle and the heaviest first.
// Reclaims and refusals are counted (Stats) and logged at WARN at most
// every 30 s, naming the client that lost a connection.
//
// A connection is idle while it carries no call: for net/http, set
// Listener.ConnState as the server's ConnState; a server whose calls the
// listener cannot see (gRPC's streams) reports them with CallStarted.
// IPv6 clients are grouped by /64, as clientip groups them.
package connlimit

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for a zero Limits.
const (
	DefaultTotal     = 1024
	DefaultPerClient = 256
	// DefaultIPv6Prefix groups IPv6 clients by /64, the block one host or
	// site usually gets, so that one host cannot rotate through addresses.
	DefaultIPv6Prefix = 64
)

const (
	// warnEvery spaces the WARN records of a listener at its caps.
	warnEvery = 30 * time.Second
	// idleGrace is how long a connection must have been idle before a
	// newcomer from another client may take its place: long enough for a
	// new connection to send its first call.
	idleGrace = time.Second
)

// Limits are a listener's caps. Zero fields take the defaults.
type Limits struct {
	Total      int // connections open at once, from every client
	PerClient  int // connections open at once from one client address
	IPv6Prefix int // the bits of an IPv6 address that name one client
}

func (c Limits) withDefaults() (Limits, error) {
	if c.Total == 0 {
		c.Total = DefaultTotal
	}
	if c.PerClient == 0 {
		c.PerClient = min(DefaultPerClient, c.Total)
	}
	if c.IPv6Prefix == 0 {
		c.IPv6Prefix = DefaultIPv6Prefix
	}
	switch {
	case c.Total < 1:
		return c, errors.New("connlimit: Total must be at least 1")
	case c.PerClient < 1 || c.PerClient > c.Total:
		return c, errors.New("connlimit: PerClient must be between 1 and Total")
	case c.IPv6Prefix < 1 || c.IPv6Prefix > 128:
		return c, errors.New("connlimit: IPv6Prefix must be between 1 and 128")
	}
	return c, nil
}

// Stats are a listener's counts since it was made.
type Stats struct {
	Open      int    // connections open now
	Clients   int    // client addresses holding them
	Accepted  uint64 // connections taken
	Reclaimed uint64 // connections closed to make room for new ones
	Refused   uint64 // new connections closed at once: their client was at its cap
}

// Listener is a net.Listener that holds at most its Limits of connections.
// Its Accept returns connections whose Close releases their place.
type Listener struct {
	net.Listener
	lim  Limits
	log  *slog.Logger
	name string

	mu      sync.Mutex
	clients map[netip.Addr]*client
	byPeer  map[netip.AddrPort]*Conn
	open    int
	idle    idleList // every idle connection, the longest idle first
	idleSeq uint64   // counts pushes onto idle, to order a client's idle ones

	accepted, reclaimed, refused atomic.Uint64
	lastWarn                     atomic.Int64 // unix ns
	warned                       struct{ reclaimed, refused uint64 }
}

type client struct {
	addr  netip.Addr
	conns []*Conn // in the order accepted
}

// Wrap caps ln's connections. name names the listener in its log records
// (say "http" or "grpc"); log may be nil for slog.Default().
func Wrap(ln net.Listener, lim Limits, name string, log *slog.Logger) (*Listener, error) {
	lim, err := lim.withDefaults()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &Listener{
		Listener: ln, lim: lim, name: name, log: log,
		clients: make(map[netip.Addr]*client), byPeer: make(map[netip.AddrPort]*Conn),
	}, nil
}

// Limits are the listener's caps, defaults filled in.
func (l *Listener) Limits() Limits { return l.lim }

// Stats reads the listener's counts.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	open, clients := l.open, len(l.clients)
	l.mu.Unlock()
	return Stats{Open: open, Clients: clients, Accepted: l.accepted.Load(), Reclaimed: l.reclaimed.Load(), Refused: l.refused.Load()}
}

// Accept waits for a connection the caps let in: one that would not fit
// is closed here (counted in Stats.Refused) and Accept waits for the next.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := l.admit(nc); c != nil {
			return c, nil
		}
	}
}

// admit registers nc, reclaiming a connection to make room if need be, or
// closes it and returns nil when it may not stay.
func (l *Listener) admit(nc net.Conn) *Conn {
	peer := addrPort(nc.RemoteAddr())
	c := &Conn{Conn: nc, l: l, peer: peer}
	key := l.clientOf(peer)
	now := time.Now()
	l.mu.Lock()
	cl := l.clients[key]
	var victim *Conn
	switch {
	case cl != nil && len(cl.conns) >= l.lim.PerClient:
		if victim = cl.oldestIdle(); victim == nil {
			l.mu.Unlock()
			l.refused.Add(1)
			_ = nc.Close()
			l.warn(cl.addr)
			return nil
		}
	case l.open >= l.lim.Total:
		if o := l.idle.oldest(); o != nil && now.Sub(o.idleSince) >= idleGrace {
			victim = o
			break
		}
		heavy := l.heaviest()
		if heavy == nil || heavy == cl || cl != nil && len(heavy.conns) <= len(cl.conns) {
			l.mu.Unlock()
			l.refused.Add(1)
			_ = nc.Close()
			l.warn(key)
			return nil
		}
		if victim = heavy.oldestIdle(); victim == nil {
			victim = heavy.conns[0]
		}
	}
	var victimClient netip.Addr
	if victim != nil {
		victimClient = victim.client
		l.removeLocked(victim)
	}
	if cl == nil {
		cl = &client{addr: key}
		l.clients[key] = cl
	}
	c.client = key
	cl.conns = append(cl.conns, c)
	if peer.IsValid() {
		l.byPeer[peer] = c
	}
	l.open++
	l.pushIdle(c, now) // a new connection carries no call yet
	l.mu.Unlock()
	l.accepted.Add(1)
	if victim != nil {
		l.reclaimed.Add(1)
		_ = victim.Conn.Close()
		l.warn(victimClient)
	}
	return c
}

// clientOf is the address that names peer's client: IPv4 as it is, IPv6
// masked to the prefix; the zero Addr for a peer that is not IP (a Unix
// socket), all of which count as one client.
func (l *Listener) clientOf(peer netip.AddrPort) netip.Addr {
	a := peer.Addr().Unmap().WithZone("")
	if a.Is6() {
		if p, err := a.Prefix(l.lim.IPv6Prefix); err == nil {
			return p.Addr()
		}
	}
	return a
}

// heaviest is the client holding the most connections.
func (l *Listener) heaviest() *client {
	var h *client
	for _, cl := range l.clients {
		if h == nil || len(cl.conns) > len(h.conns) {
			h = cl
		}
	}
	return h
}

// removeLocked forgets c; the caller holds mu. It reports whether c was
// still registered.
func (l *Listener) removeLocked(c *Conn) bool {
	if c.gone {
		return false
	}
	c.gone = true
	if c.idleList != nil {
		l.idle.remove(c)
	}
	if cl := l.clients[c.client]; cl != nil {
		for i, o := range cl.conns {
			if o == c {
				cl.conns = append(cl.conns[:i], cl.conns[i+1:]...)
				break
			}
		}
		if len(cl.conns) == 0 {
			delete(l.clients, c.client)
		}
	}
	if l.byPeer[c.peer] == c {
		delete(l.byPeer, c.peer)
	}
	l.open--
	return true
}

// warn logs the listener's reclaims and refusals since its last record,
// at most every warnEvery; client is the one whose connection was just
// closed.
func (l *Listener) warn(client netip.Addr) {
	now := time.Now().UnixNano()
	last := l.lastWarn.Load()
	if last != 0 && now-last < int64(warnEvery) || !l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	reclaimed, refused := l.reclaimed.Load(), l.refused.Load()
	l.mu.Lock()
	open, clients := l.open, len(l.clients)
	newReclaimed, newRefused := reclaimed-l.warned.reclaimed, refused-l.warned.refused
	l.warned.reclaimed, l.warned.refused = reclaimed, refused
	l.mu.Unlock()
	l.log.Warn("connection cap reached: connections closed to make room",
		"listener", l.name, "reclaimed", newReclaimed, "refused", newRefused,
		"open", open, "clients", clients, "client", client.String(),
		"cap", l.lim.Total, "per client", l.lim.PerClient)
}

// ConnState is for http.Server.ConnState: it tells the listener which
// connections are between requests, also through TLS (a *tls.Conn over
// the listener's connection). A server that sets its own ConnState calls
// this one from it.
func (l *Listener) ConnState(nc net.Conn, state http.ConnState) {
	c := l.own(nc)
	if c == nil {
		return
	}
	switch state {
	case http.StateActive:
		l.busy(c, +1)
	case http.StateIdle:
		l.busy(c, -1)
	case http.StateHijacked:
		// No longer the server's: it still holds its place until closed,
		// as busy.
		l.busy(c, +1)
	}
}

// own is the listener's connection under nc, which may wrap it (a
// *tls.Conn over a Listener's connection), or nil.
func (l *Listener) own(nc net.Conn) *Conn {
	for range 8 {
		if c, ok := nc.(*Conn); ok {
			if c.l == l {
				return c
			}
			return nil
		}
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		nc = u.NetConn()
	}
	return nil
}

// CallStarted tells the listener that the connection from remote carries
// one more call until the returned func is called, for servers whose
// calls the listener cannot see (a gRPC stream). A remote that is not one
// of the listener's connections is ignored.
func (l *Listener) CallStarted(remote net.Addr) (done func()) {
	peer := addrPort(remote)
	l.mu.Lock()
	c := l.byPeer[peer]
	l.mu.Unlock()
	if c == nil || !peer.IsValid() {
		return func() {}
	}
	l.busy(c, +1)
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			l.busy(c, -1)
		}
	}
}

// busy moves c's count of open calls by delta; at zero c is idle.
func (l *Listener) busy(c *Conn, delta int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.gone {
		return
	}
	// An HTTP connection has one request at a time: StateActive and
	// StateIdle alternate, so its count stays 0 or 1.
	c.calls = max(c.calls+delta, 0)
	switch {
	case c.calls > 0 && c.idleList != nil:
		l.idle.remove(c)
	case c.calls == 0 && c.idleList == nil:
		l.pushIdle(c, time.Now())
	}
}

func (l *Listener) pushIdle(c *Conn, now time.Time) {
	l.idleSeq++
	c.idleSeq, c.idleSince = l.idleSeq, now
	l.idle.push(c)
}

// Conn is one of a Listener's connections.
type Conn struct {
	net.Conn
	l      *Listener
	peer   netip.AddrPort
	client netip.Addr
	// Under the listener's mu.
	calls      int
	gone       bool
	idleList   *idleList // non-nil while in the idle list
	idleSeq    uint64    // the order it joined the idle list in
	idleSince  time.Time // when it joined the idle list
	prev, next *Conn
}

// Close closes the connection and gives its place back.
func (c *Conn) Close() error {
	c.l.mu.Lock()
	c.l.removeLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// idleList is a doubly linked list of idle connections, in the order they
// became idle.
type idleList struct{ head, tail *Conn }

func (q *idleList) push(c *Conn) {
	c.idleList, c.prev, c.next = q, q.tail, nil
	if q.tail != nil {
		q.tail.next = c
	} else {
		q.head = c
	}
	q.tail = c
}

func (q *idleList) remove(c *Conn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.tail = c.prev
	}
	c.idleList, c.prev, c.next = nil, nil, nil
}

func (q *idleList) oldest() *Conn { return q.head }

// oldestIdle is the client's connection idle the longest, or nil.
func (cl *client) oldestIdle() *Conn {
	var o *Conn
	for _, c := range cl.conns {
		if c.idleList != nil && (o == nil || c.idleSeq < o.idleSeq) {
			o = c
		}
	}
	return o
}

// addrPort is a's address and port, or the zero AddrPort when a is not an
// IP address.
func addrPort(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort()
	case nil:
		return netip.AddrPort{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.AddrPort{}
	}
	return ap
}
