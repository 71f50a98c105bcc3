package memberpace

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/status"
	"github.com/pedreviljoen/gopherpace/seeds"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ready is status.Ready's answer for a limiter on tr.
func ready(t *testing.T, tr *Transport) (int, string) {
	t.Helper()
	l, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithTransport(tr), gopherpace.WithLogger(quiet),
		gopherpace.WithLimiterID("probe-"+time.Now().Format("150405.000000000")))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rec := httptest.NewRecorder()
	status.Ready(l).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code, rec.Body.String()
}

// A node whose seeds answer but refuse it (another gossip key, no key, or
// another label) says so at ERROR when it starts and, at most every 10 s,
// on its retries, and stays unready (status.Ready answers 503) while it is
// alone: it never passes for the first node of a new cluster. A node
// whose seeds do not answer at all is the first of a new cluster and is
// ready; so is one let in.
func TestARefusedNodeIsLoudAndNotReady(t *testing.T) {
	key := []byte("0123456789abcdef")
	cluster := node(t, "member", WithSecretKeys(key), WithLabel("prod"))
	seed := WithSeeds(seeds.Static{cluster.GossipAddr()})
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"another key", []Option{WithSecretKeys([]byte("fedcba9876543210")), WithLabel("prod")}},
		{"no key", []Option{WithLabel("prod")}},
		{"another label", []Option{WithSecretKeys(key), WithLabel("staging")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs lockedBuffer
			tr := node(t, "stranger", append(c.opts, seed, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))...)
			err := tr.JoinError()
			if err == nil || !strings.Contains(err.Error(), cluster.GossipAddr()) {
				t.Fatalf("JoinError %v, want the refusal by %s", err, cluster.GossipAddr())
			}
			if code, body := ready(t, tr); code != http.StatusServiceUnavailable || !strings.Contains(body, "refused") {
				t.Fatalf("readiness %d %q, want 503 naming the refusal", code, body)
			}
			if n := strings.Count(logs.String(), "level=ERROR msg=\"the cluster refuses this node"); n != 1 {
				t.Fatalf("%d ERROR records at start, want 1:\n%s", n, logs.String())
			}
			// Alone, it retries every second: still refused, and not logged
			// again within 10 s.
			joins := tr.Stats().Joins
			eventually(t, 10*time.Second, "two more join attempts", func() bool { return tr.Stats().Joins >= joins+2 })
			if tr.JoinError() == nil {
				t.Fatal("a retry the seeds refused cleared the refusal")
			}
			if n := strings.Count(logs.String(), "the cluster refuses this node"); n != 1 {
				t.Fatalf("%d ERROR records within 10 s, want 1", n)
			}
		})
	}
	t.Run("seeds that do not answer", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		silent := ln.Addr().String()
		ln.Close() // nobody listens there now
		tr := node(t, "first", WithSecretKeys(key), WithLabel("prod"), WithSeeds(seeds.Static{silent}))
		if err := tr.JoinError(); err != nil {
			t.Fatalf("the first node of a new cluster: %v", err)
		}
		if code, _ := ready(t, tr); code != http.StatusOK {
			t.Fatalf("the first node of a new cluster is not ready: %d", code)
		}
	})
	t.Run("let in", func(t *testing.T) {
		tr := node(t, "friend", WithSecretKeys(key), WithLabel("prod"), seed)
		if err := tr.JoinError(); err != nil {
			t.Fatal(err)
		}
		if code, _ := ready(t, tr); code != http.StatusOK {
			t.Fatalf("a node that joined is not ready: %d", code)
		}
	})
}

// Which join errors are refusals: memberlist's own words for each case.
func TestRefusedJoinErrors(t *testing.T) {
	for msg, refused := range map[string]bool{
		"failed to join 10.0.0.1:7946: no installed keys could decrypt the message":                true,
		"failed to join 10.0.0.1:7946: remote state is encrypted and encryption is not configured": true,
		"failed to join 10.0.0.1:7946: encryption is configured but remote state is not encrypted": true,
		"failed to join 10.0.0.1:7946: EOF":                                                        true,
		"failed to join 10.0.0.1:7946: dial tcp 10.0.0.1:7946: connect: connection refused":        false,
		"failed to join 10.0.0.1:7946: dial tcp 10.0.0.1:7946: i/o timeout":                        false,
		"failed to resolve peers.svc:7946: lookup peers.svc on 10.0.0.10:53: no such host":         false,
		"failed to join 10.0.0.1:7946: dial tcp 10.0.0.1:7946: connect: no route to host":          false,
	} {
		if got := refusedJoin(errString(msg)); got != refused {
			t.Errorf("%q: refused %v, want %v", msg, got, refused)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }
