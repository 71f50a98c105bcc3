package gopherpace

import (
	"encoding/binary"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/datagram"
	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// WithFloorAtZero runs the reference design's algorithm, as the accuracy
// harness's baseline.
func WithFloorAtZero() Option { return func(c *config) { c.floorAtZero = true } }

// GroupsFrom is the cluster size from which limiters send through groups.
const GroupsFrom = datagram.GroupsFrom

// WireLimiterID is the 8-byte limiter identity that frames carry for id.
func WireLimiterID(id string) uint64 { return wire.NameHash(0, id) }

// TestKeyHashSecret is memtransport.DefaultKeyHashSecret, which the
// package cannot import (memtransport imports it): the secret
// EncodeTestFrame hashes keys with unless told another.
// TestTestKeyHashSecretIsMemtransports holds the two equal.
var TestKeyHashSecret = []byte("memtransport: a simulated cluster's key hash secret")

// KeyHashOf is key's hash under secret, as a limiter names the key.
func KeyHashOf(secret []byte, key string) uint64 { return bucket.NewKeyHasher(secret).Sum(key) }

// LeaseTokens puts n fresh tokens into one of l's lease slots, as a
// processor's lease taken at time at would hold them. It reports false when
// l does not lease.
func LeaseTokens(l *Limiter, at time.Time, n int64) bool {
	if l.leases == nil {
		return false
	}
	l.leases.Slots[0].Word.Store(bucket.PackLease(l.nanos(at), n))
	return true
}

// TestFrame is a frame's fields, for tests that craft frames as an
// attacker would. Keys are hashed under KeyHashSecret, TestKeyHashSecret
// when nil, and the frame names that secret's fingerprint.
type TestFrame struct {
	Leaving, Idle, Partial      bool
	Limiter                     string // the limiter ID; DefaultLimiterID if empty
	Incarnation, Seq, GlobalSum uint64
	Global, DemandSum           uint64
	Level                       int64  // tokens in the sender's replica
	Withheld                    uint64 // 65536ths of the refill
	Keys                        []string
	KeyTokens                   []uint64
	KeyRefused                  []uint64 // zero when nil
	KeyLevels                   []int64  // the sender's level of each key; a full bucket (1<<20) when nil
	KeyHashSecret               []byte
}

// EncodeTestFrame encodes f in the current wire format, without checking
// that its values make sense: counts go on the wire as they are, as a
// hostile sender could write them.
func EncodeTestFrame(f TestFrame) []byte {
	if f.Limiter == "" {
		f.Limiter = DefaultLimiterID
	}
	if f.KeyHashSecret == nil {
		f.KeyHashSecret = TestKeyHashSecret
	}
	h := bucket.NewKeyHasher(f.KeyHashSecret)
	fr := wire.Frame{Leaving: f.Leaving, Idle: f.Idle, Partial: f.Partial, Limiter: wire.NameHash(0, f.Limiter), Incarnation: f.Incarnation, Seq: f.Seq,
		GlobalSum: f.GlobalSum, Global: int64(f.Global), DemandSum: f.DemandSum, Level: f.Level, Withheld: f.Withheld, KeyHashID: h.Fingerprint()}
	b := wire.AppendHeader(nil, &fr, len(f.Keys))
	for i, k := range f.Keys {
		b = binary.LittleEndian.AppendUint64(b, h.Sum(k))
		b = binary.AppendUvarint(b, f.KeyTokens[i])
		refused := uint64(0)
		if f.KeyRefused != nil {
			refused = f.KeyRefused[i]
		}
		b = binary.AppendUvarint(b, refused)
		level := int64(1 << 20)
		if f.KeyLevels != nil {
			level = f.KeyLevels[i]
		}
		b = binary.AppendVarint(b, level)
	}
	return b
}

// DecodeTestFrame reads a frame's header fields (keyed entries are
// dropped), so that a test can replay a member's last frame with one field
// changed, as a member holding the key could.
func DecodeTestFrame(b []byte) (TestFrame, error) {
	var f wire.Frame
	if err := wire.Decode(b, &f); err != nil {
		return TestFrame{}, err
	}
	return TestFrame{Leaving: f.Leaving, Idle: f.Idle, Partial: f.Partial, Incarnation: f.Incarnation, Seq: f.Seq, GlobalSum: f.GlobalSum,
		Global: uint64(f.Global), DemandSum: f.DemandSum, Level: f.Level, Withheld: f.Withheld}, nil
}

// ShareInterval is the price of one share token on a clustered limiter (ns
// per token), and whether the share is in force.
func ShareInterval(l *Limiter) (time.Duration, bool) {
	iv, on, _ := engineOf(l).Share()
	return iv, on
}

// GroupOf is the group of the node named name in a cluster of n nodes
// without zones.
func GroupOf(name string, n int) int { return datagram.GroupOf(name, n) }

// ShareSliced reports whether l's share is on and sliced.
func ShareSliced(l *Limiter) bool {
	_, _, sliced := engineOf(l).Share()
	return sliced
}

// TopKeysBytesSent is the bytes of l's top keys sent to its peers.
func TopKeysBytesSent(l *Limiter) uint64 {
	if l.topGossip == nil {
		return 0
	}
	return l.topGossip.link.sent.Bytes.Load()
}

// TopKeysWireID is the ID the top keys of the limiter named id travel
// under.
func TopKeysWireID(id string) uint64 { return wire.NameHash(topKeysSalt, id) }

// KeyHashIDOf is the fingerprint frames carry of the key hash under
// secret.
func KeyHashIDOf(secret []byte) uint32 { return bucket.NewKeyHasher(secret).Fingerprint() }
