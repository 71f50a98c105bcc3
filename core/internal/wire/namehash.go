package wire

import "math/bits"

const (
	prime1 uint64 = 0x9E3779B185EBCA87
	prime2 uint64 = 0xC2B2AE3D27D4EB4F
	prime3 uint64 = 0x165667B19E3779F9
	prime4 uint64 = 0x85EBCA77C2B2AE63
	prime5 uint64 = 0x27D4EB2F165667C5
)

// NameHash hashes names the cluster agrees on and nobody chooses to
// attack: limiter IDs (their hash names a limiter in frames), node names
// (groups, phases). It is fast and fixed, a single-lane variant of the
// xxHash64 round and avalanche, and not secret: client keys use core's keyed
// hash (keyhash.go). salt keeps one use's values apart from another's.
func NameHash(salt uint64, s string) uint64 {
	h := salt + prime5 + uint64(len(s))
	i := 0
	for ; i+8 <= len(s); i += 8 {
		k := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		h ^= bits.RotateLeft64(k*prime2, 31) * prime1
		h = bits.RotateLeft64(h, 27)*prime1 + prime4
	}
	if i+4 <= len(s) {
		k := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24
		h ^= k * prime1
		h = bits.RotateLeft64(h, 23)*prime2 + prime3
		i += 4
	}
	for ; i < len(s); i++ {
		h ^= uint64(s[i]) * prime5
		h = bits.RotateLeft64(h, 11) * prime1
	}
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	h ^= h >> 32
	return h
}
