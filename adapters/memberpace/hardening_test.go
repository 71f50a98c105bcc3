package memberpace

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// A bind address must be an IP: "localhost" once listened on every
// interface and reported [::]:port.
func TestBindAddrMustBeAnIP(t *testing.T) {
	for _, addr := range []string{"localhost", "example.com", "", "127.0.0.1:7946"} {
		t.Run(addr, func(t *testing.T) {
			tr, err := New(WithBindAddr(addr), WithBindPort(0), WithLogger(quiet))
			if err == nil {
				tr.Close()
				t.Fatalf("bind address %q accepted", addr)
			}
			if !strings.Contains(err.Error(), "not an IP address") {
				t.Fatalf("error %q does not say what is wrong", err)
			}
		})
	}
}

// Gossip others can reach is encrypted, or plaintext by a deliberate
// choice; loopback is private to the host.
func TestPlaintextOffLoopbackNeedsConsent(t *testing.T) {
	// Refused before anything binds.
	_, err := New(WithBindAddr("0.0.0.0"), WithBindPort(0), WithLogger(quiet))
	if err == nil || !strings.Contains(err.Error(), "WithSecretKeys") || !strings.Contains(err.Error(), "WithPlaintext") {
		t.Fatalf("plaintext on 0.0.0.0: err %v, want one naming WithSecretKeys and WithPlaintext", err)
	}
	for _, tc := range []struct {
		name    string
		c       config
		exposed bool
	}{
		{"loopback, plaintext", config{bindAddr: "127.0.0.1"}, false},
		{"v6 loopback, plaintext", config{bindAddr: "::1"}, false},
		{"every interface, keys", config{bindAddr: "0.0.0.0", keys: [][]byte{make([]byte, 16)}}, false},
		{"every interface, consent", config{bindAddr: "0.0.0.0", plaintext: true}, true},
		{"a pod IP, consent", config{bindAddr: "10.1.2.3", plaintext: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exposed, err := tc.c.checkExposure()
			if err != nil || exposed != tc.exposed {
				t.Fatalf("checkExposure = %v, %v; want %v, nil", exposed, err, tc.exposed)
			}
		})
	}
}

// levelCounter counts records by level.
type levelCounter struct {
	mu     sync.Mutex
	counts map[slog.Level]int
}

func (h *levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *levelCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.counts[r.Level]++
	h.mu.Unlock()
	return nil
}
func (h *levelCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *levelCounter) WithGroup(string) slog.Handler      { return h }

// Garbage datagrams are counted, and logged at most once per kind of
// complaint every 10 s: 5,000 of them once made 5,000 ERROR records.
func TestGarbageDatagramsDoNotFloodTheLog(t *testing.T) {
	h := &levelCounter{counts: map[slog.Level]int{}}
	tr := node(t, "target", WithLogger(slog.New(h)))
	conn, err := net.Dial("udp", tr.GossipAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 64)
	for i := range 5000 {
		for j := range buf {
			buf[j] = byte(rng.Uint32())
		}
		conn.Write(buf[:1+i%len(buf)])
		if i%500 == 0 {
			time.Sleep(time.Millisecond) // let the receiver keep up
		}
	}
	var last uint64
	eventually(t, 5*time.Second, "memberlist complains about most of the garbage, then stops", func() bool {
		n := tr.Stats().MemberlistErrors
		settled := n >= 2500 && n == last
		last = n
		time.Sleep(50 * time.Millisecond)
		return settled
	})
	h.mu.Lock()
	records := h.counts[slog.LevelWarn] + h.counts[slog.LevelError]
	all := records + h.counts[slog.LevelInfo] + h.counts[slog.LevelDebug]
	h.mu.Unlock()
	st := tr.Stats()
	if records > 20 {
		t.Fatalf("%d WARN/ERROR records for %d complaints; want one per kind of complaint", records, st.MemberlistErrors)
	}
	if st.LogRecordsSuppressed+uint64(all) < st.MemberlistErrors {
		t.Fatalf("stats %+v: %d records logged, the rest must be counted as suppressed", st, all)
	}
	t.Logf("%d complaints, %d records, %d suppressed", st.MemberlistErrors, records, st.LogRecordsSuppressed)
}

// At shutdown memberlist's probes still under way fail on the closed
// sockets; those lines are no error. Before shutdown the same line is one.
func TestClosedSocketsAtShutdownAreNoError(t *testing.T) {
	const line = "[ERR] memberlist: Failed to send UDP ping: write udp 10.0.0.1:7946->10.0.0.2:7946: use of closed network connection"
	for _, closing := range []bool{false, true} {
		var buf bytes.Buffer
		w := newLogWriter(slog.New(slog.NewTextHandler(&buf, nil)))
		w.closing.Store(closing)
		w.line(line, time.Now())
		if got := strings.Contains(buf.String(), "level=ERROR"); got == closing {
			t.Fatalf("closing %v: logged at ERROR %v: %q", closing, got, buf.String())
		}
	}
}
