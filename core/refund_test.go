package gopherpace

import (
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// A refund gives back exactly what it names, never past full; one of more
// than the key can have spent within its window (what it owes, and one
// bucket besides) is refused whole, counted and logged once; a refund of
// tokens that refill has already repaid gives nothing back.
func TestRefundNeverExceedsSpent(t *testing.T) {
	for _, clustered := range []bool{false, true} {
		name := map[bool]string{false: "standalone", true: "clustered"}[clustered]
		t.Run(name, func(t *testing.T) {
			var logs syncLog
			opts := []Option{WithRefillRate(1), WithBucketSize(10), WithLogger(logs.logger())}
			if clustered {
				opts = append(opts, WithTransport(&frozenTransport{now: time.Now()}))
			}
			l := newTestLimiter(t, opts...)
			at := l.epoch.Add(time.Second)
			for _, key := range []string{"k", ""} {
				l.TakeAt(at, key, 10)
				if err := l.RefundAt(at, key, math.MaxInt64); !errors.Is(err, ErrRefundExceedsSpent) {
					t.Fatalf("key %q: a refund of 2^63-1 after spending 10: %v", key, err)
				}
				if err := l.RefundAt(at, key, 21); !errors.Is(err, ErrRefundExceedsSpent) {
					t.Fatalf("key %q: a refund of 21 tokens owing 10 (and a bucket of 10): %v", key, err)
				}
				if d := l.peekAt(at, key); d.Remaining != 0 {
					t.Fatalf("key %q: a refused refund gave back %d tokens", key, d.Remaining)
				}
				if err := l.RefundAt(at, key, 4); err != nil {
					t.Fatal(err)
				}
				if d := l.peekAt(at, key); d.Remaining != 4 {
					t.Fatalf("key %q: %d tokens after a refund of 4, want exactly 4", key, d.Remaining)
				}
				if err := l.RefundAt(at, key, 16); err != nil { // owes 6: 6 + 10 may have been spent
					t.Fatal(err)
				}
				if d := l.peekAt(at, key); d.Remaining != 10 {
					t.Fatalf("key %q: %d tokens, want a full bucket of 10 and no more", key, d.Remaining)
				}
				if err := l.RefundAt(at, key, 11); !errors.Is(err, ErrRefundExceedsSpent) {
					t.Fatalf("key %q: a refund of 11 to a full bucket of 10: %v", key, err)
				}
			}
			if err := l.RefundAt(at, "never seen", 10); err != nil {
				t.Fatalf("a refund of a bucket's worth to a key with no bucket: %v", err)
			}
			if err := l.RefundAt(at, "never seen", 11); !errors.Is(err, ErrRefundExceedsSpent) {
				t.Fatalf("a refund of more than a bucket to a key with no bucket: %v", err)
			}
			if st := l.Stats(); st.RefundsRefused != 7 {
				t.Fatalf("%d refunds refused, want 7", st.RefundsRefused)
			}
			if n := strings.Count(logs.String(), "refund of more tokens than the key can have spent"); n != 1 {
				t.Fatalf("%d WARN records for 7 refused refunds within 30 s, want 1", n)
			}
		})
	}
}

// peekAt is Peek at a given time.
func (l *Limiter) peekAt(at time.Time, key string) Decision { return l.PeekAt(at, key) }

// syncLog is a log that tests read back.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncLog) logger() *slog.Logger { return slog.New(slog.NewTextHandler(s, nil)) }
