package bucket

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
)

// Keys are identified by a 64-bit hash, not by the key string: the store
// then holds 8 bytes per key instead of a copy of the string, and the wire
// format carries fixed 8-byte identities. Clients often choose keys (an
// API key, a tenant, a descriptor value), so the hash is a keyed
// pseudo-random function, SipHash-2-4 under a 128-bit secret: without the
// secret, nobody can find a key that shares another's bucket, or pick keys
// that crowd one shard of the store. Where the secret comes from:
//
//   - WithKeyHashSecret pins it;
//   - clustered, the transport gives the cluster's (a KeyHashSecreter:
//     memberpace derives it from the gossip encryption key), so that every
//     node names a key alike; a transport that gives none leaves a public
//     secret, and New says so at WARN;
//   - standalone, it is random per limiter.
//
// Frames carry a fingerprint of the secret with their keyed counts, so a
// node whose secret differs has its keyed counts dropped and counted,
// never read as other keys' (internal/cluster's receiver.go).
//
// Accidental collisions are negligible: among n live keys the chance that
// any two share a hash is about n²/2⁶⁵, 3·10⁻⁸ at a million keys. Even
// then a key with a limit of its own (an override) is matched by its
// string, never by its hash alone.

// KeyHasher is SipHash-2-4 under one secret: two compression rounds per
// 8 bytes and four to finish, the variant its authors propose as a PRF.
// SipHash-1-3, which hash tables use against flooding, costs 3 ns less
// on an address key (8 ns against 11); the stronger claim is worth it.
type KeyHasher struct{ k0, k1 uint64 }

// PublicSecret is the key hash's secret when a clustered limiter's
// transport gives none: known to all, so SipHash still spreads keys
// evenly but anyone can compute a key's hash.
var PublicSecret = []byte("gopherpace: public key hash secret")

// NewKeyHasher derives a hasher from a secret of at least 16 bytes: a
// longer one is reduced by SHA-256, so any secret's whole entropy counts.
func NewKeyHasher(secret []byte) KeyHasher {
	if len(secret) != 16 {
		sum := sha256.Sum256(secret)
		secret = sum[:16]
	}
	return KeyHasher{binary.LittleEndian.Uint64(secret), binary.LittleEndian.Uint64(secret[8:])}
}

// RandomKeyHasher is a hasher under a fresh random secret.
func RandomKeyHasher() KeyHasher {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return NewKeyHasher(b[:])
}

// Fingerprint names the secret in frames: a hash of a fixed string under
// it, which tells whether two nodes share the secret and nothing of the
// secret itself.
func (h KeyHasher) Fingerprint() uint32 {
	return uint32(h.Sum("gopherpace: key hash fingerprint"))
}

func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13)
	v1 ^= v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16)
	v3 ^= v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21)
	v3 ^= v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17)
	v1 ^= v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}

// Sum is SipHash-2-4 of s. It never allocates.
func (h KeyHasher) Sum(s string) uint64 {
	v0 := h.k0 ^ 0x736f6d6570736575
	v1 := h.k1 ^ 0x646f72616e646f6d
	v2 := h.k0 ^ 0x6c7967656e657261
	v3 := h.k1 ^ 0x7465646279746573
	n := len(s)
	for len(s) >= 8 {
		m := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		v3 ^= m
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= m
		s = s[8:]
	}
	m := uint64(n) << 56
	for i := len(s) - 1; i >= 0; i-- {
		m |= uint64(s[i]) << (8 * i)
	}
	v3 ^= m
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= m
	v2 ^= 0xff
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	return v0 ^ v1 ^ v2 ^ v3
}
