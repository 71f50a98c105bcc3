package connlimit

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// server accepts on a capped loopback listener and keeps every connection
// it accepted, for the test to mark busy or idle.
type server struct {
	l     *Listener
	mu    sync.Mutex
	conns []*Conn
	done  chan struct{}
}

func newServer(t *testing.T, lim Limits, log *slog.Logger) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := Wrap(ln, lim, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{l: l, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c.(*Conn))
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-s.done
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
	})
	return s
}

// dialFrom connects to the server from the loopback address from
// (127.0.0.x: every one of them is this host on Linux).
func dialFrom(t *testing.T, s *server, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", s.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitFor polls cond until it holds or ten seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *server) accepted(n uint64) func() bool {
	return func() bool { return s.l.Stats().Accepted+s.l.Stats().Refused >= n }
}

// serverSide is the server's end of the client connection c.
func (s *server) serverSide(t *testing.T, c net.Conn) *Conn {
	t.Helper()
	var found *Conn
	waitFor(t, "the server's side of "+c.LocalAddr().String(), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, sc := range s.conns {
			if sc.RemoteAddr().String() == c.LocalAddr().String() {
				found = sc
				return true
			}
		}
		return false
	})
	return found
}

// closedByServer reports whether the server closed c: a read returns EOF
// or a reset within the wait, not a timeout.
func closedByServer(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// At its own cap a client loses its connection idle the longest to its
// new one; other clients lose nothing.
func TestPerClientCapReclaimsThatClientsOldestIdle(t *testing.T) {
	s := newServer(t, Limits{Total: 10, PerClient: 3}, quiet())
	other := dialFrom(t, s, "127.0.0.3")
	var mine []net.Conn
	for i := range 3 {
		mine = append(mine, dialFrom(t, s, "127.0.0.2"))
		waitFor(t, "accepted", s.accepted(uint64(i+2)))
	}
	// The first becomes busy, so the second is the longest idle.
	done := s.l.CallStarted(s.serverSide(t, mine[0]).RemoteAddr())
	defer done()
	fourth := dialFrom(t, s, "127.0.0.2")
	waitFor(t, "the fourth accepted", s.accepted(5))
	if !closedByServer(mine[1], 5*time.Second) {
		t.Fatal("the client's longest idle connection was not reclaimed")
	}
	for name, c := range map[string]net.Conn{"busy": mine[0], "newest idle": mine[2], "new": fourth, "other client's": other} {
		if closedByServer(c, 50*time.Millisecond) {
			t.Errorf("the %s connection was closed", name)
		}
	}
	st := s.l.Stats()
	if st.Reclaimed != 1 || st.Refused != 0 || st.Open != 4 || st.Clients != 2 {
		t.Errorf("stats %+v, want 1 reclaimed, 0 refused, 4 open, 2 clients", st)
	}
}

// A client at its cap with every connection busy has its new one
// refused, and keeps the busy ones.
func TestPerClientCapRefusesWhenAllBusy(t *testing.T) {
	s := newServer(t, Limits{Total: 10, PerClient: 2}, quiet())
	var mine []net.Conn
	for i := range 2 {
		c := dialFrom(t, s, "127.0.0.2")
		mine = append(mine, c)
		waitFor(t, "accepted", s.accepted(uint64(i+1)))
		defer s.l.CallStarted(s.serverSide(t, c).RemoteAddr())()
	}
	third := dialFrom(t, s, "127.0.0.2")
	if !closedByServer(third, 5*time.Second) {
		t.Fatal("a third connection was kept")
	}
	for i, c := range mine {
		if closedByServer(c, 50*time.Millisecond) {
			t.Errorf("busy connection %d was closed", i)
		}
	}
	// Another client still gets in.
	dialFrom(t, s, "127.0.0.3")
	waitFor(t, "the other client accepted", func() bool { return s.l.Stats().Accepted == 3 })
	if st := s.l.Stats(); st.Refused != 1 || st.Reclaimed != 0 || st.Open != 3 {
		t.Errorf("stats %+v, want 1 refused, 0 reclaimed, 3 open", st)
	}
}

// At the total cap a newcomer takes the place of the connection idle the
// longest, whichever client holds it; with nothing idle, the heaviest
// client gives up its oldest; a newcomer that is itself the heaviest is
// refused.
func TestTotalCap(t *testing.T) {
	s := newServer(t, Limits{Total: 4, PerClient: 4}, quiet())
	a1 := dialFrom(t, s, "127.0.0.2")
	waitFor(t, "a1", s.accepted(1))
	b1 := dialFrom(t, s, "127.0.0.3")
	waitFor(t, "b1", s.accepted(2))
	a2 := dialFrom(t, s, "127.0.0.2")
	waitFor(t, "a2", s.accepted(3))
	a3 := dialFrom(t, s, "127.0.0.2")
	waitFor(t, "a3", s.accepted(4))
	// Everything idle: the newcomer takes a1's place, the oldest idle.
	c1 := dialFrom(t, s, "127.0.0.4")
	waitFor(t, "c1", s.accepted(5))
	if !closedByServer(a1, 5*time.Second) {
		t.Fatal("the longest idle connection was not reclaimed")
	}
	// Everything busy now: A (two) is the heaviest and gives up a2.
	for _, c := range []net.Conn{b1, a2, a3, c1} {
		defer s.l.CallStarted(s.serverSide(t, c).RemoteAddr())()
	}
	d1 := dialFrom(t, s, "127.0.0.5")
	waitFor(t, "d1", s.accepted(6))
	if !closedByServer(a2, 5*time.Second) {
		t.Fatal("the heaviest client's oldest connection was not reclaimed")
	}
	for name, c := range map[string]net.Conn{"a3": a3, "b1": b1, "c1": c1, "d1": d1} {
		if closedByServer(c, 50*time.Millisecond) {
			t.Errorf("%s was closed", name)
		}
	}
	// Now every client holds one and the newcomer would be as heavy as the
	// heaviest: a client that already holds one is refused.
	defer s.l.CallStarted(s.serverSide(t, d1).RemoteAddr())()
	b2 := dialFrom(t, s, "127.0.0.3")
	if !closedByServer(b2, 5*time.Second) {
		t.Fatal("a client as heavy as any other took a busy client's place")
	}
	if st := s.l.Stats(); st.Reclaimed != 2 || st.Refused != 1 || st.Open != 4 {
		t.Errorf("stats %+v, want 2 reclaimed, 1 refused, 4 open", st)
	}
}

// Closing a connection gives its place back, once, and a connection
// reclaimed and then closed by its server does not free a second place.
func TestCloseGivesThePlaceBack(t *testing.T) {
	s := newServer(t, Limits{Total: 2, PerClient: 2}, quiet())
	a := dialFrom(t, s, "127.0.0.2")
	waitFor(t, "a", s.accepted(1))
	sa := s.serverSide(t, a)
	b := dialFrom(t, s, "127.0.0.2")
	waitFor(t, "b", s.accepted(2))
	sb := s.serverSide(t, b)
	sa.Close()
	sa.Close()
	if st := s.l.Stats(); st.Open != 1 {
		t.Fatalf("open %d after one close (twice), want 1", st.Open)
	}
	dialFrom(t, s, "127.0.0.2")
	waitFor(t, "c", s.accepted(3))
	dialFrom(t, s, "127.0.0.2") // reclaims b
	waitFor(t, "d", s.accepted(4))
	sb.Close() // the server closes its side too, as a server would
	if st := s.l.Stats(); st.Open != 2 || st.Reclaimed != 1 {
		t.Fatalf("stats %+v after a reclaimed connection's close, want 2 open, 1 reclaimed", st)
	}
}

// The attack a capped listener exists for, over real HTTP: one client
// holds keep-alive connections idle, more than the whole cap; a fresh
// client from another address is served at once, and the attacker's own
// connections are what gives way.
func TestIdleKeepAliveFloodLocksNobodyOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := Wrap(ln, Limits{Total: 32, PerClient: 16}, "http", quiet())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }),
		ConnState: l.ConnState, IdleTimeout: time.Minute, ReadHeaderTimeout: 5 * time.Second,
	}
	go srv.Serve(l)
	defer srv.Close()
	// The attack: 100 connections from each of 127.0.0.2 and .3, each
	// sending one request and then idling.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for _, from := range []string{"127.0.0.2", "127.0.0.3"} {
		for range 100 {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
			c, err := d.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		}
	}
	waitFor(t, "the attack's connections", func() bool { return l.Stats().Accepted+l.Stats().Refused >= 200 })
	if st := l.Stats(); st.Open > 32 {
		t.Fatalf("two clients hold %d connections, over their caps of 16 each", st.Open)
	}
	// A fresh client from another address.
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}).DialContext}}
	defer client.CloseIdleConnections()
	start := time.Now()
	resp, err := client.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatalf("a fresh client failed during the attack: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	t.Logf("a fresh client was served in %v while two clients held %d connections (%+v)", time.Since(start), l.Stats().Open, l.Stats())
}

// A flood of refusals and reclaims makes one WARN record, not one each.
func TestCapLogsAreRateLimited(t *testing.T) {
	var buf syncBuffer
	s := newServer(t, Limits{Total: 10, PerClient: 1}, slog.New(slog.NewTextHandler(&buf, nil)))
	first := dialFrom(t, s, "127.0.0.2")
	waitFor(t, "first", s.accepted(1))
	defer s.l.CallStarted(s.serverSide(t, first).RemoteAddr())()
	for i := range 50 {
		dialFrom(t, s, "127.0.0.2")
		waitFor(t, "refusal", s.accepted(uint64(i+2)))
	}
	if st := s.l.Stats(); st.Refused != 50 {
		t.Fatalf("refused %d, want 50", st.Refused)
	}
	out := buf.String()
	if n := strings.Count(out, "connection cap reached"); n != 1 {
		t.Fatalf("%d WARN records for 50 refusals, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "client=127.0.0.2") || !strings.Contains(out, "listener=test") {
		t.Errorf("the record does not name the listener and the client: %s", out)
	}
}

// IPv6 clients are one client per /64; IPv4-mapped addresses are their
// IPv4 address; a peer that is not IP is one client.
func TestClientOf(t *testing.T) {
	l, err := Wrap(nil, Limits{}, "", quiet())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ peer, want string }{
		{"[2001:db8:1:2:aaaa::1]:80", "2001:db8:1:2::"},
		{"[2001:db8:1:2:bbbb::9]:81", "2001:db8:1:2::"},
		{"[::ffff:192.0.2.7]:80", "192.0.2.7"},
		{"192.0.2.7:9", "192.0.2.7"},
	} {
		if got := l.clientOf(netip.MustParseAddrPort(c.peer)); got.String() != c.want {
			t.Errorf("clientOf(%s) = %s, want %s", c.peer, got, c.want)
		}
	}
	if got := l.clientOf(addrPort(&net.UnixAddr{Name: "/tmp/s", Net: "unix"})); got.IsValid() {
		t.Errorf("a Unix peer is client %s, want the zero Addr", got)
	}
}

func TestBadLimits(t *testing.T) {
	for _, lim := range []Limits{{Total: -1}, {Total: 2, PerClient: 3}, {PerClient: -1}, {IPv6Prefix: 129}} {
		if _, err := Wrap(nil, lim, "", nil); err == nil {
			t.Errorf("Wrap accepted %+v", lim)
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
