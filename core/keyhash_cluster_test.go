package gopherpace_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// The package's copy of memtransport's secret (it cannot import
// memtransport) is memtransport's.
func TestTestKeyHashSecretIsMemtransports(t *testing.T) {
	if !bytes.Equal(gopherpace.TestKeyHashSecret, memtransport.DefaultKeyHashSecret) {
		t.Fatal("gopherpace.TestKeyHashSecret differs from memtransport.DefaultKeyHashSecret")
	}
}

// Two nodes whose key hash secrets differ never read each other's keyed
// counts as their own keys': the counts are dropped and counted, an ERROR
// says so at most every 30 s, and the global counts, which name no key,
// are still shared. Two nodes with one secret share both.
func TestNodesWithAnotherKeyHashSecretDoNotMisreadKeys(t *testing.T) {
	for _, differ := range []bool{false, true} {
		name := map[bool]string{false: "one secret", true: "two secrets"}[differ]
		t.Run(name, func(t *testing.T) {
			net := memtransport.New()
			var logs syncBuffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			var lims []*gopherpace.Limiter
			for i, secret := range [][]byte{[]byte("the cluster's secret, 16+ bytes"), []byte("another secret of 16+ bytes!")} {
				if !differ {
					secret = []byte("the cluster's secret, 16+ bytes")
				}
				tr, err := net.Join([]string{"a", "b"}[i])
				if err != nil {
					t.Fatal(err)
				}
				l, err := gopherpace.New(gopherpace.WithTransport(tr), gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(10),
					gopherpace.WithKeyHashSecret(secret), gopherpace.WithLogger(log))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				lims = append(lims, l)
			}
			net.Advance(time.Second)
			// a spends a key's whole bucket and the global one, many times
			// over a minute of ticks.
			for range 60 {
				for range 10 {
					lims[0].TakeAt(net.Now(), "tenant", 1)
					lims[0].TakeAt(net.Now(), "", 1)
				}
				net.Advance(time.Second)
			}
			// b then asks for ten tokens of each, one at a time.
			keyed, global := 0, 0
			for range 10 {
				if d, _ := lims[1].TakeAt(net.Now(), "tenant", 1); d.Allowed {
					keyed++
				}
				if d, _ := lims[1].TakeAt(net.Now(), "", 1); d.Allowed {
					global++
				}
				net.Advance(10 * time.Millisecond)
			}
			st := lims[1].Stats()
			records := strings.Count(logs.String(), "a peer hashes keys under another secret")
			t.Logf("b: %d of 10 keyed tokens allowed, %d of 10 global, frames with another key hash %d, ERROR records %d",
				keyed, global, st.FramesOtherKeyHash, records)
			if global > 1 {
				t.Error("the global count was not shared")
			}
			if differ {
				if keyed < 9 || st.FramesOtherKeyHash == 0 {
					t.Error("b read a's keyed counts, hashed under another secret")
				}
				if records < 1 || records > 3 || !strings.Contains(logs.String(), "level=ERROR") {
					t.Errorf("%d ERROR records over 60 s, want one every 30 s", records)
				}
			} else if keyed > 1 || st.FramesOtherKeyHash != 0 || records != 0 {
				t.Error("nodes with one secret did not share the keyed count")
			}
		})
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// plainTransport has a Transport's methods and nothing else: no key hash
// secret to give.
type plainTransport struct{ gopherpace.Transport }

// A clustered limiter over a transport that gives no secret hashes keys
// under a public one, and says so once at WARN when it starts.
func TestAPublicKeyHashSecretIsAWarning(t *testing.T) {
	net := memtransport.New()
	tr, err := net.Join("a")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	l, err := gopherpace.New(gopherpace.WithTransport(plainTransport{tr}), gopherpace.WithRefillRate(1),
		gopherpace.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n := strings.Count(logs.String(), "level=WARN msg=\"the key hash has no secret"); n != 1 {
		t.Fatalf("%d WARN records of a public key hash secret, want 1:\n%s", n, logs.String())
	}
}
