package gopherpace

import (
	"encoding/binary"
	"io"
	"log/slog"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/datagram"
	"github.com/pedreviljoen/gopherpace/core/internal/wire"
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

func (*fuzzNet) KeyHashSecret() []byte { return TestKeyHashSecret }

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

// SendTo makes the fuzz transport a Unicaster, so that the hub reads
// digest entries' origins from the member list (the cluster is too small
// to be grouped; the node relays nothing).
func (n *fuzzNet) SendTo(string, []byte) error { return nil }
func (n *fuzzNet) Close() error                { return nil }
func (n *fuzzNet) Now() time.Time              { return n.now }
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
	// Frames whose level, demand and withheld fields sit at their extremes.
	f.Add([]byte{0, 0, 0, 255, 255, 0, 1, 5, 0, 0, 0, 0, 0xf3, 0xf0, 0, 0xf3, 3, 255})
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x85, 0x8d, 0, 0x84, 3, 20, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x85, 0x8d, 0, 0x84})
	f.Add([]byte{0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x87, 0, 0x8a, 3, 10, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x8d, 0, 0x8a})
	// Relayed frames: of a member by another, of a stranger, of this node.
	f.Add([]byte{0, 1, 5, 200, 3, 2, 9, 9, 9, 2, 40, 0, 2, 7, 1, 255, 1, 2, 3, 0, 0, 0, 9, 9, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xc1, 2, 0, 1, 0, 0x26, 3, 0, 0, 0, 0, 0xf0, 0x85, 0x8d, 0, 0x84, 3, 200, 0xc1, 1, 0, 1, 0, 0x2e, 0, 0, 0, 0, 0, 0xf3, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		const rate, bucketSize = 1000, 100
		n := &fuzzNet{now: time.Unix(1_700_000_000, 0), members: []string{"m1", "m2"}}
		// Mostly fail-open, whose refill never slows; sometimes the share
		// policy, where lying withheld shares and silent members slow it.
		partition := PartitionFailOpen
		if len(data) > 0 && data[0] >= 0xc0 {
			partition = PartitionShare
		}
		l, err := New(WithRefillRate(rate), WithBucketSize(bucketSize), WithTransport(n),
			WithPartitionPolicy(partition), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		rule, tick := l.rules.Default(), int64(engineOf(l).Tick())
		keys := []string{"k", "j"}
		tatOf := func(key string, now int64) int64 {
			if key == "" {
				tat, _, _ := l.dec.peekGlobal(now)
				return max(tat, now)
			}
			tat, _ := l.dec.peekKeyed(l.hasher.Sum(key), now)
			return max(tat, now) // no bucket: full
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
		relayed := false
		for i := 0; i < len(data); {
			op := data[i] % 4
			from := []string{"m1", "m2", "stranger"}[byteAt(i+1)%3]
			var b []byte
			switch op {
			case 0, 1: // a well-formed frame with fuzzed fields
				inc := []uint64{uint64(n.now.UnixNano()), uint64(n.now.UnixNano()) - uint64(time.Minute), 0, math.MaxUint64, u64(i + 2)}[byteAt(i+2)%5]
				sum := u64(i+3) >> (byteAt(i+4) % 64)
				if x := byteAt(i + 11); x >= 0xf0 {
					sum = extreme(x, bucketSize)
				}
				seq := uint64(byteAt(i + 6))
				fr := wire.Frame{Leaving: byteAt(i+5)&1 == 1, Limiter: WireLimiterID(DefaultLimiterID), Incarnation: inc, Seq: seq, GlobalSum: sum,
					Global:    int64(min(sum, uint64(byteAt(i+7)))),
					DemandSum: extremeOr(byteAt(i+12), u64(i+2), bucketSize),
					Level:     int64(extremeOr(byteAt(i+13), uint64(byteAt(i+14))-128, bucketSize)),
					Withheld:  extremeOr(byteAt(i+15), uint64(byteAt(i+14))<<8, wire.WithheldOne)}
				hdr := wire.AppendHeader(nil, &fr, 0)
				hdr = hdr[:len(hdr)-1] // the entry count follows
				if seq != 0 && op == 1 {
					// Admits, refusals (a hot key's load: any claim), or both.
					tokens, refused := u64(i+9)>>(byteAt(i+10)%64), extremeOr(byteAt(i+15), uint64(byteAt(i+14)), bucketSize)
					switch byteAt(i+5) >> 6 {
					case 1:
						tokens = 0
					case 2:
						refused = 0
					}
					if tokens == 0 && refused == 0 {
						refused = 1
					}
					// The sender's level of the key: any claim, extremes too.
					level := int64(extremeOr(byteAt(i+13), uint64(byteAt(i+12))-128, bucketSize))
					hdr = appendKeyed(hdr, l.hasher, keys[byteAt(i+8)%2], tokens, refused, level)
				} else {
					hdr = append(hdr, 0)
				}
				b = hdr
				if byteAt(i+5)&2 != 0 {
					// Relayed, by from, as the frame of any origin: a
					// member, a stranger, or this node itself; a frame
					// without keyed counts in an envelope or as a
					// digest's entry.
					origin := []string{"m1", "m2", "stranger", "self"}[byteAt(i+5)>>2%4]
					if byteAt(i+5)&0x10 != 0 && !(seq != 0 && op == 1) {
						b = wire.AppendDigest(nil, byteAt(i+5)&0x20 != 0, fr.Limiter, wire.AppendDigestEntry(nil, wire.Entry{Origin: wire.OriginHash(origin), Tagged: byteAt(i+5)&0x40 != 0, Tag: wire.IncarnationTag(fr.Incarnation)}, &fr))
					} else {
						b = wire.AppendRelay(nil, origin, byteAt(i+5)&0x20 != 0, b)
					}
					relayed = true
				}
				i += 16
			case 2: // raw bytes
				m := int(byteAt(i+1)) % 40
				b = data[min(i+2, len(data)):min(i+2+m, len(data))]
				i += 2 + m
			case 3: // time passes, and this node is asked for a key (so
				// that peers' reports can make it hot, with a share)
				n.advance(time.Duration(byteAt(i+1)) * 500 * time.Microsecond)
				for range byteAt(i+1) % 8 {
					l.TakeAt(n.now, keys[byteAt(i+1)/8%2], 1)
					lastFrame = n.now // what it spends refills within the same window
				}
				i += 2
				continue
			}
			if n.recv == nil {
				t.Fatal("not subscribed")
			}
			now := l.nanos(n.now)
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
		// Under the share policy the buckets' clock may stand still while a
		// lying withheld share is fresh (one isolation timeout after the
		// last frame), then runs at least at a third of the rate while both
		// members are silent: the bound docs/security.md states.
		wait := rule.Window() + time.Duration(rule.Interval) + time.Millisecond
		if partition == PartitionShare {
			wait = time.Duration(3*tick) + 3*(rule.Window()+time.Duration(rule.Interval)) + time.Duration(tick) // isolation: 1.5 gossip intervals
			if relayed {
				wait += time.Duration(datagram.RelaySlack(tick)) // a relayed peer's silence counts that much later
			}
		}
		n.advance(lastFrame.Add(wait).Sub(n.now))
		at := n.now
		for _, key := range []string{"", "k", "j"} {
			if d, _ := l.TakeAt(at, key, 1); !d.Allowed {
				t.Fatalf("bucket %q still stalled a window after the last frame: %+v", key, d)
			}
		}
	})
}

// extremes are the values at which a received field's arithmetic breaks
// if anything does: the ends of int64 and uint64, and one off either side
// of ±B (a level's honest range) or of the withheld field's whole refill.
func extreme(x byte, b int64) uint64 {
	m := int64(max(b, 0))
	return []uint64{math.MaxInt64, math.MaxInt64 - 20, 1 << 63, math.MaxUint64, math.MaxUint64 - 1,
		uint64(m + 1), uint64(m - 1), uint64(-m - 1), uint64(-m + 1), uint64(m), uint64(-m),
		1 << 40, uint64(1) << 62, uint64(-m << 40), 0, 1}[x%16]
}

// extremeOr is extreme(x, b) for x of 0x80 and above, otherwise v.
func extremeOr(x byte, v uint64, b int64) uint64 {
	if x >= 0x80 {
		return extreme(x, b)
	}
	return v
}

// appendKeyed appends an entry count of one, the fingerprint of h's
// secret and one entry.
func appendKeyed(b []byte, h bucket.KeyHasher, key string, tokens, refused uint64, level int64) []byte {
	b = append(b, 1)
	b = binary.LittleEndian.AppendUint32(b, h.Fingerprint())
	b = binary.LittleEndian.AppendUint64(b, h.Sum(key))
	b = binary.AppendUvarint(b, tokens)
	b = binary.AppendUvarint(b, refused)
	return binary.AppendVarint(b, level)
}
