package gopherpace

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// xxHash64's primes, as wire.NameHash mixes with them.
const (
	prime1 uint64 = 0x9E3779B185EBCA87
	prime2 uint64 = 0xC2B2AE3D27D4EB4F
	prime3 uint64 = 0x165667B19E3779F9
	prime4 uint64 = 0x85EBCA77C2B2AE63
	prime5 uint64 = 0x27D4EB2F165667C5
)

// The attack that broke the key hash before it had a secret: the old
// function (now wire.NameHash, for names nobody attacks) is invertible, so a
// colliding key for any victim is computed, not searched for. forgeKey is
// that attack: a 16-byte key whose old hash under salt 0 equals the
// victim's.
func forgeKey(victim string, rng *rand.Rand) string {
	target := wire.NameHash(0, victim)
	// Undo the avalanche.
	h := target
	h ^= h >> 32
	h *= inverse(prime3)
	h ^= h>>29 ^ h>>58
	h *= inverse(prime2)
	h ^= h >> 33
	// Undo the last block's round: h = rotl(x, 27)*prime1 + prime4.
	x := bits.RotateLeft64((h-prime4)*inverse(prime1), -27)
	// A random first block, run forward.
	var key [16]byte
	for i := range 8 {
		key[i] = 'a' + byte(rng.IntN(26))
	}
	h1 := prime5 + 16
	k := binary.LittleEndian.Uint64(key[:8])
	h1 ^= bits.RotateLeft64(k*prime2, 31) * prime1
	h1 = bits.RotateLeft64(h1, 27)*prime1 + prime4
	// The second block that takes h1 to x.
	k2 := bits.RotateLeft64((x^h1)*inverse(prime1), -31) * inverse(prime2)
	binary.LittleEndian.PutUint64(key[8:], k2)
	return string(key[:])
}

// inverse is a's inverse modulo 2^64 (a odd), by Newton's iteration.
func inverse(a uint64) uint64 {
	x := a
	for range 6 {
		x *= 2 - a*x
	}
	return x
}

// The forger breaks the old hash every time; against a limiter's keyed
// hash its keys never share the victim's bucket, and neither does any of
// 2^20 keys tried by brute force: spending them all leaves the victim's
// bucket full.
func TestForgedKeysNoLongerCollide(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	victims := []string{"victim", "tenant-a", "203.0.113.7", "sk_live_0123456789abcdef"}
	for _, v := range victims {
		if f := forgeKey(v, rng); f == v || wire.NameHash(0, f) != wire.NameHash(0, v) {
			t.Fatalf("the forger did not break the old hash for %q: its key %x", v, f)
		}
	}
	l := newTestLimiter(t, WithRefillRate(1), WithBucketSize(1))
	hashes := map[uint64]string{}
	for _, v := range victims {
		hashes[l.hasher.Sum(v)] = v
	}
	for i := range 1 << 20 {
		var k string
		if i < 1000 {
			k = forgeKey(victims[i%len(victims)], rng)
		} else {
			k = fmt.Sprintf("key-%x", rng.Uint64())
		}
		if v, ok := hashes[l.hasher.Sum(k)]; ok {
			t.Fatalf("%x shares %q's hash", k, v)
		}
		if i < 1000 {
			l.TakeAt(t0, k, 1)
		}
	}
	for _, v := range victims {
		if d, _ := l.TakeAt(t0, v, 1); !d.Allowed {
			t.Fatalf("%q's bucket was spent by forged keys", v)
		}
	}
}

// Standalone limiters hash under secrets of their own, random; clustered
// ones over one transport hash alike; WithKeyHashSecret pins the secret.
func TestKeyHashSecretSources(t *testing.T) {
	a := newTestLimiter(t, WithRefillRate(1))
	b := newTestLimiter(t, WithRefillRate(1))
	if a.hasher == b.hasher {
		t.Fatal("two standalone limiters share a key hash secret")
	}
	c := newTestLimiter(t, WithRefillRate(1), WithTransport(&nopTransport{}))
	d := newTestLimiter(t, WithRefillRate(1), WithTransport(&nopTransport{}), WithLimiterID("other"))
	if c.hasher != d.hasher || c.hasher != bucket.NewKeyHasher(TestKeyHashSecret) {
		t.Fatal("clustered limiters do not take the transport's secret")
	}
	pin := []byte("pinned: sixteen+ bytes")
	e := newTestLimiter(t, WithRefillRate(1), WithTransport(&nopTransport{}), WithKeyHashSecret(pin))
	f := newTestLimiter(t, WithRefillRate(1), WithKeyHashSecret(pin))
	if e.hasher != f.hasher || e.hasher == c.hasher {
		t.Fatal("WithKeyHashSecret does not pin the secret")
	}
	if _, err := New(WithRefillRate(1), WithKeyHashSecret([]byte("short"))); err == nil {
		t.Fatal("a secret of 5 bytes was taken")
	}
}

// An override is a key's own limit by its key string: a key that shared
// its hash would still be decided on the default rule.
func TestOverridesMatchTheKeyNotItsHash(t *testing.T) {
	l := newTestLimiter(t, WithRefillRate(1), WithBucketSize(1), WithOverride("vip", 100, 500))
	h := l.hasher.Sum("vip")
	if rule := l.keyRule(h, "vip", 0); rule.BucketSize != 500 {
		t.Fatalf("vip's rule has a bucket of %d, want 500", rule.BucketSize)
	}
	if rule := l.keyRule(h, "impostor", 0); rule != l.rules.Default() {
		t.Fatalf("a key with vip's hash got a bucket of %d, want the default", rule.BucketSize)
	}
}
