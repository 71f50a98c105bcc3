package gopherpace

import (
	"encoding/binary"
	"io"
	"log/slog"
	"math"
	"sort"
	"testing"
	"time"
)

// fuzzNet is a transport with a hand-driven clock, for fuzzing one node's
// receiving side: the fuzzer plays every peer, member or not.
type fuzzNet struct {
	now     time.Time
	timers  []fuzzTimer
	nextID  int
	members []string
	recv    func(string, []byte)
}

type fuzzTimer struct {
	at   time.Time
	id   int
	f    func()
	dead *bool
}

func (n *fuzzNet) Name() string           { return "self" }
func (n *fuzzNet) Members() []string      { return n.members }
func (n *fuzzNet) MaxFrameSize() int      { return 1350 }
func (n *fuzzNet) Broadcast([]byte) error { return nil }
func (n *fuzzNet) Close() error           { return nil }
func (n *fuzzNet) Now() time.Time         { return n.now }
func (n *fuzzNet) Subscribe(f func(string, []byte)) func() {
	n.recv = f
	return func() { n.recv = nil }
}

func (n *fuzzNet) AfterFunc(d time.Duration, f func()) func() bool {
	dead := false
	n.nextID++
	n.timers = append(n.timers, fuzzTimer{n.now.Add(max(d, 0)), n.nextID, f, &dead})
	return func() bool { dead = true; return true }
}

// advance moves the clock by d, running due timers in order.
func (n *fuzzNet) advance(d time.Duration) {
	end := n.now.Add(d)
	for runs := 0; ; runs++ {
		if runs > 100_000 {
			panic("timers keep rescheduling themselves at one instant")
		}
		sort.Slice(n.timers, func(i, j int) bool {
			if n.timers[i].at.Equal(n.timers[j].at) {
				return n.timers[i].id < n.timers[j].id
			}
			return n.timers[i].at.Before(n.timers[j].at)
		})
		if len(n.timers) == 0 || n.timers[0].at.After(end) {
			break
		}
		t := n.timers[0]
		n.timers = n.timers[1:]
		n.now = t.at
		if !*t.dead {
			t.f()
		}
	}
	n.now = end
}

// FuzzReceive feeds one node arbitrary frames from members and non-members,
// interleaved with the passing of time, and checks the receiving side's two
// promises (docs/security.md):
//   - a received frame never adds tokens: no bucket is fuller after a frame
//     than before it, at the same instant;
//   - a stall ends at most one window after the last frame: then the
//     global bucket and every keyed one admit again.
func FuzzReceive(f *testing.F) {
	f.Add([]byte{0, 1, 5, 200, 3, 0, 9, 9, 9, 2, 40, 0, 2, 7, 1, 255, 1, 2, 3})
	f.Add([]byte{0, 0, 0, 255, 255, 255, 255, 0, 1, 0, 0, 0, 1, 2, 100, 0, 3, 1})
	f.Add([]byte{1, 103, 112, 1, 0, 2, 255, 0, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		const rate, burst = 1000, 100
		n := &fuzzNet{now: time.Unix(1_700_000_000, 0), members: []string{"m1", "m2"}}
		l, err := New(WithRefillRate(rate), WithBucketSize(burst), WithTransport(n),
			WithPartitionPolicy(PartitionFailOpen), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		e, p := l.eng, l.pols.dflt()
		keys := []string{"k", "j"}
		tatOf := func(key string, now int64) int64 {
			if key == "" {
				tat, _ := e.global.tat(p, now)
				return max(tat, now)
			}
			if ent := e.keys.lookup(hashKey(0, key)); ent != nil {
				return max(ent.tat.Load(), now)
			}
			return now // no bucket: full
		}
		byteAt := func(i int) byte {
			if i < len(data) {
				return data[i]
			}
			return 0
		}
		u64 := func(i int) uint64 {
			var b [8]byte
			for j := range b {
				b[j] = byteAt(i + j)
			}
			return binary.LittleEndian.Uint64(b[:])
		}
		var lastFrame time.Time
		for i := 0; i < len(data); {
			op := data[i] % 4
			from := []string{"m1", "m2", "stranger"}[byteAt(i+1)%3]
			var b []byte
			switch op {
			case 0, 1: // a well-formed frame with fuzzed fields
				inc := []uint64{uint64(n.now.UnixNano()), uint64(n.now.UnixNano()) - uint64(time.Minute), 0, math.MaxUint64, u64(i + 2)}[byteAt(i+2)%5]
				sum := u64(i+3) >> (byteAt(i+4) % 64)
				seq := uint64(byteAt(i + 6))
				hdr := frameFor(e.id, inc, seq, sum, min(sum, uint64(byteAt(i+7))), byteAt(i+5)&1 == 1)
				if seq != 0 && op == 1 {
					hdr = appendKeyed(hdr, keys[byteAt(i+8)%2], u64(i+9)>>(byteAt(i+10)%64))
				} else {
					hdr = append(hdr, 0)
				}
				b = hdr
				i += 11
			case 2: // raw bytes
				m := int(byteAt(i+1)) % 40
				b = data[min(i+2, len(data)):min(i+2+m, len(data))]
				i += 2 + m
			case 3: // time passes
				n.advance(time.Duration(byteAt(i+1)) * 500 * time.Microsecond)
				i += 2
				continue
			}
			if n.recv == nil {
				t.Fatal("not subscribed")
			}
			now := e.now()
			before := []int64{tatOf("", now), tatOf("k", now), tatOf("j", now)}
			n.recv(from, b)
			after := []int64{tatOf("", now), tatOf("k", now), tatOf("j", now)}
			for j := range before {
				if after[j] < before[j] {
					t.Fatalf("a frame from %s added tokens to bucket %d: TAT %d -> %d at %d", from, j, before[j], after[j], now)
				}
			}
			lastFrame = n.now
		}
		if lastFrame.IsZero() {
			return
		}
		// One window and one token after the last frame, every bucket admits.
		n.advance(lastFrame.Add(p.window() + time.Duration(p.interval) + time.Millisecond).Sub(n.now))
		at := n.now
		for _, key := range []string{"", "k", "j"} {
			if d, _ := l.TakeAt(at, key, 1); !d.Allowed {
				t.Fatalf("bucket %q still stalled a window after the last frame: %+v", key, d)
			}
		}
	})
}

// frameFor encodes a frame header with the given fields and no entry count.
func frameFor(limiter, inc, seq, sum, global uint64, leaving bool) []byte {
	f := frame{leaving: leaving, limiter: limiter, incarnation: inc, seq: seq, globalSum: sum, global: int64(global)}
	b := appendHeader(nil, &f, 0)
	return b[:len(b)-1] // the caller appends the entry count
}

// appendKeyed appends an entry count of one and one entry.
func appendKeyed(b []byte, key string, tokens uint64) []byte {
	b = append(b, 1)
	b = binary.LittleEndian.AppendUint64(b, hashKey(0, key))
	return binary.AppendUvarint(b, tokens)
}
