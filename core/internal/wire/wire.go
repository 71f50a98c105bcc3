// Package wire is gopherpace's frame format: the protocol boundary between
// nodes. It encodes and decodes frames and knows nothing else: not the
// engine, not the buckets, not who sent a frame. Every byte a decoder sees
// may come from anyone who can reach the gossip port, so Decode accepts
// exactly one well-formed frame of this version and refuses anything else
// with an error, never a panic (FuzzDecodeFrame). What the fields mean to a
// receiver, and how far a lying sender can move it, is the engine's
// business (docs/security.md).
//
// Version 11. A datagram holds one or more frames back to back, each
// complete with its own magic and version, so that the limiters sharing a
// transport send one datagram per peer, not one each (Next splits them).
// In a large cluster a datagram may also hold relay envelopes (another
// node's frames, passed on; see Relay below) and digests (several nodes'
// running totals, passed on; see Digest). One frame; integers are
// little-endian or unsigned varints (uv):
//
//	magic       2 bytes  "gp"
//	version     1 byte   11
//	flags       1 byte   bit 0: the sender is leaving the cluster
//	                     bit 1: the sender is idle, and sends nothing more
//	                     until it admits or is refused again
//	                     bit 2: some member is out of the sender's sight
//	                     (idle receivers wake, so that it hears them)
//	                     bit 4: not a rate limiter's frame but an in-flight
//	                     limiter's gauge frame, laid out alike (gauges.go)
//	                     bit 7: not a frame but a relay envelope or,
//	                     with bit 5, a digest (below)
//	limiter     8 bytes  hash of the limiter ID, so limiters can share a transport
//	incarnation 8 bytes  the sender's start time; a restart gets a new one
//	seq         uv       per-sender sequence number of frames with keyed
//	                     entries, for de-duplication; 0 on other frames
//	globalSum   uv       tokens the sender admitted from the global bucket
//	                     since it started: every frame carries it, so a lost
//	                     frame's count arrives with the next one
//	global      uv       of which admitted since the sender's previous flush
//	demandSum   uv       tokens requested from the global bucket since the
//	                     sender started, admitted or refused for want of
//	                     tokens: the sender's offered load, for sharing the
//	                     bucket fairly
//	level       sv       tokens left in the sender's replica of the global
//	                     bucket when it sent the frame (negative: debt), as
//	                     a zigzag varint
//	withheld    uv       the share of the refill the sender withholds for
//	                     peers out of its sight, in 65536ths
//	count       uv       number of keyed entries that follow
//	keyHashID   4 bytes  only when count is above 0: a fingerprint of the
//	                     secret the sender hashes keys with, so that a
//	                     receiver with another never reads the entries as
//	                     its own keys'
//	entries     count × (key hash 8 bytes, tokens uv, refused uv, level sv):
//	            tokens admitted from the key's bucket since the sender's
//	            previous report, and tokens refused for want of tokens
//	            (the key's offered load, for sharing a contended key
//	            fairly), one of the two at least 1; and the tokens left in
//	            the sender's replica of the key's bucket when it sent the
//	            frame (negative: debt), as a zigzag varint, so that a
//	            replica fuller than the sender's (a newcomer's) comes down
//
// A keyed entry takes 11 bytes while its counts and level are small (the
// level below 64 either way).
//
// A relay envelope carries frames of one origin that a node passes on to
// others (the groups of a large cluster, docs/design.md):
//
//	magic       2 bytes  "gp"
//	version     1 byte   11
//	flags       1 byte   bit 7 set; bit 6: the last hop (spread inside the
//	                     receiver's group, not to be passed on again)
//	origin      1 byte n (1 to 255), then n bytes: the origin's node name
//	length      uv       of the frames that follow
//	frames      the origin's frames, back to back, exactly as it sent them
//	            (at least one; never an envelope)
//
// Digests are described at Digest. A node refuses the frames of every
// other version (ErrVersion), and a node of another refuses its frames,
// so a cluster runs one version at a time (docs/releasing.md); what each
// version added is in docs/decisions.md.
package wire

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
)

const (
	magic0 = 'g'
	magic1 = 'p'
	// Version is the frame format's version; a frame of another is refused
	// (ErrVersion), never misread.
	Version     = 11
	flagLeaving = 1 << 0
	flagIdle    = 1 << 1
	flagPartial = 1 << 2
	// flagTagged marks a digest entry whose incarnation is a tag.
	flagTagged = 1 << 3
	flagDigest = 1 << 5
	flagSpread = 1 << 6
	flagRelay  = 1 << 7
	// MaxOrigin is the longest origin name an envelope carries.
	MaxOrigin = 255
	// HeaderFixed is the header's fixed part: magic, version, flags,
	// limiter and incarnation.
	HeaderFixed = 2 + 1 + 1 + 8 + 8
	// HeaderMax is the largest possible header: the fixed part, seven
	// 10-byte varints and the key hash's fingerprint.
	HeaderMax = HeaderFixed + 7*binary.MaxVarintLen64 + keyHashIDSize
	// keyHashIDSize is the fingerprint's size.
	keyHashIDSize = 4
	// EntryMax is the largest encoded keyed entry.
	EntryMax = 8 + 3*binary.MaxVarintLen64
	// entryMin is the smallest: the key, two one-byte counts and a
	// one-byte level.
	entryMin = 11
	// MaxTokens bounds every count a frame carries: more than any bucket
	// can hold (a tolerance of 2^60 ns at one token a nanosecond). The core
	// checks that its own bound agrees.
	MaxTokens = uint64(1) << 60
	// WithheldOne is the whole refill, in the units of the withheld field.
	WithheldOne = 1 << 16
)

// KeyCount is one keyed entry: a key's hash, the tokens admitted and the
// tokens refused for want of tokens, and the level of the sender's replica.
type KeyCount struct {
	Key     uint64
	Tokens  int64
	Refused int64
	Level   int64
}

// Frame is one decoded frame; see the package comment for each field.
type Frame struct {
	Leaving     bool
	Idle        bool
	Partial     bool
	Limiter     uint64
	Incarnation uint64
	Seq         uint64
	GlobalSum   uint64
	Global      int64
	DemandSum   uint64
	Level       int64
	Withheld    uint64 // 65536ths
	// KeyHashID names the secret Keys' hashes were made with; written
	// only with keyed entries.
	KeyHashID uint32
	Keys      []KeyCount
}

// The reasons Decode refuses a frame.
var (
	ErrShort      = errors.New("gopherpace: frame truncated")
	ErrMagic      = errors.New("gopherpace: not a gopherpace frame")
	ErrVersion    = errors.New("gopherpace: unknown frame version")
	ErrVarint     = errors.New("gopherpace: bad varint in frame")
	ErrTokens     = errors.New("gopherpace: token count out of range")
	ErrTrailing   = errors.New("gopherpace: trailing bytes in frame")
	ErrEntryCount = errors.New("gopherpace: entry count exceeds frame size")
	ErrRelay      = errors.New("gopherpace: malformed relay envelope")
	ErrDigest     = errors.New("gopherpace: malformed digest")
)

// agedTotals is added to every running total written in full and taken
// off when read; 0 but in the simulator's aged rows (SetAged).
var agedTotals atomic.Uint64

// AgedTotals is what SetAged adds to every running total: 2^28, a month
// of admits at 100 a second. A multiple of 2^21, it leaves the low bits a
// truncated total carries as they are.
const AgedTotals = 1 << 28

// SetAged makes every running total written in full read AgedTotals
// larger on the wire (and every one read, as much smaller), so that the
// simulator measures the bytes of a long-running cluster, whose totals
// take more bytes than a young one's, in seconds. For tests only; the
// nodes exchanging frames must agree on it.
func SetAged(on bool) {
	agedTotals.Store(map[bool]uint64{true: AgedTotals}[on])
}

// unage takes agedTotals off a total read in full.
func unage(v uint64) (uint64, error) {
	aged := agedTotals.Load()
	if v < aged {
		return 0, ErrTokens
	}
	return v - aged, nil
}

// AppendHeader encodes every field of f but the entries; the caller appends
// count entries with AppendEntry.
func AppendHeader(b []byte, f *Frame, count int) []byte {
	b = append(b, magic0, magic1, Version, frameFlags(f))
	b = binary.LittleEndian.AppendUint64(b, f.Limiter)
	b = binary.LittleEndian.AppendUint64(b, f.Incarnation)
	b = binary.AppendUvarint(b, f.Seq)
	aged := agedTotals.Load()
	b = binary.AppendUvarint(b, f.GlobalSum+aged)
	b = binary.AppendUvarint(b, uint64(f.Global))
	b = binary.AppendUvarint(b, f.DemandSum+aged)
	b = binary.AppendVarint(b, f.Level)
	b = binary.AppendUvarint(b, f.Withheld)
	b = binary.AppendUvarint(b, uint64(count))
	if count > 0 {
		b = binary.LittleEndian.AppendUint32(b, f.KeyHashID)
	}
	return b
}

// frameFlags is f's flags byte, the same in a frame and a digest entry.
func frameFlags(f *Frame) byte {
	flags := byte(0)
	if f.Leaving {
		flags |= flagLeaving
	}
	if f.Idle {
		flags |= flagIdle
	}
	if f.Partial {
		flags |= flagPartial
	}
	return flags
}

// AppendEntry encodes one keyed entry.
func AppendEntry(b []byte, kc KeyCount) []byte {
	b = binary.LittleEndian.AppendUint64(b, kc.Key)
	b = binary.AppendUvarint(b, uint64(kc.Tokens))
	b = binary.AppendUvarint(b, uint64(kc.Refused))
	return binary.AppendVarint(b, kc.Level)
}

// Encode is the whole frame f: its header and every entry.
func Encode(b []byte, f *Frame) []byte {
	b = AppendHeader(b, f, len(f.Keys))
	for _, kc := range f.Keys {
		b = AppendEntry(b, kc)
	}
	return b
}

// EntrySize is the encoded size of kc.
func EntrySize(kc KeyCount) int {
	n := entryMin
	for v := uint64(kc.Tokens); v >= 0x80; v >>= 7 {
		n++
	}
	for v := uint64(kc.Refused); v >= 0x80; v >>= 7 {
		n++
	}
	for v := uint64(kc.Level<<1) ^ uint64(kc.Level>>63); v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// Next splits the first frame off a datagram: frame is its bytes, rest
// what follows (empty after the last). It checks only what it needs to
// find the frame's end (the magic, the version and every length), so that
// a frame it returns is worth handing to Decode, which checks the rest. On
// an error the rest of the datagram cannot be read.
func Next(b []byte) (frame, rest []byte, err error) {
	if len(b) < HeaderFixed {
		if len(b) >= 2 && (b[0] != magic0 || b[1] != magic1) {
			return nil, nil, ErrMagic
		}
		return nil, nil, ErrShort
	}
	if b[0] != magic0 || b[1] != magic1 {
		return nil, nil, ErrMagic
	}
	if b[2] != Version {
		return nil, nil, ErrVersion
	}
	if b[3]&flagRelay != 0 {
		return nextRelay(b)
	}
	at := HeaderFixed
	var count uint64
	for i := range 7 { // seq, globalSum, global, demandSum, level, withheld, count
		v, n := binary.Uvarint(b[at:])
		if n <= 0 {
			if n == 0 {
				return nil, nil, ErrShort
			}
			return nil, nil, ErrVarint
		}
		at += n
		if i == 6 {
			count = v
		}
	}
	if count > 0 {
		if len(b)-at < keyHashIDSize {
			return nil, nil, ErrShort
		}
		at += keyHashIDSize
	}
	if count > uint64(len(b)-at)/entryMin {
		return nil, nil, ErrEntryCount
	}
	for range count {
		if len(b)-at < entryMin {
			return nil, nil, ErrShort
		}
		at += 8
		for range 3 { // tokens, refused, level
			_, n := binary.Uvarint(b[at:])
			if n <= 0 {
				if n == 0 {
					return nil, nil, ErrShort
				}
				return nil, nil, ErrVarint
			}
			at += n
		}
	}
	return b[:at], b[at:], nil
}

// Decode parses b into f, reusing f.Keys. It refuses anything that is not
// exactly one well-formed frame of this version (Next splits a datagram
// into its frames); on an error f holds nothing to rely on.
func Decode(b []byte, f *Frame) error {
	if len(b) < HeaderFixed {
		if len(b) >= 2 && (b[0] != magic0 || b[1] != magic1) {
			return ErrMagic
		}
		return ErrShort
	}
	if b[0] != magic0 || b[1] != magic1 {
		return ErrMagic
	}
	if b[2] != Version {
		return ErrVersion
	}
	if b[3]&flagRelay != 0 {
		return ErrRelay // an envelope, not a frame: OpenRelay reads it
	}
	if b[3]&flagGauges != 0 {
		return ErrGauges // an in-flight limiter's: DecodeGauges reads it
	}
	f.Leaving = b[3]&flagLeaving != 0
	f.Idle = b[3]&flagIdle != 0
	f.Partial = b[3]&flagPartial != 0
	f.Limiter = binary.LittleEndian.Uint64(b[4:])
	f.Incarnation = binary.LittleEndian.Uint64(b[12:])
	b = b[HeaderFixed:]
	var err error
	if f.Seq, b, err = uvarint(b); err != nil {
		return err
	}
	if f.GlobalSum, b, err = uvarintAged(b); err != nil {
		return err
	}
	var g uint64
	if g, b, err = uvarint(b); err != nil {
		return err
	}
	if g > MaxTokens || g > f.GlobalSum {
		return ErrTokens
	}
	f.Global = int64(g)
	if f.DemandSum, b, err = uvarintAged(b); err != nil {
		return err
	}
	if f.Level, b, err = varint(b); err != nil {
		return err
	}
	if f.Withheld, b, err = uvarint(b); err != nil {
		return err
	}
	if f.Withheld > WithheldOne {
		return ErrTokens
	}
	var count uint64
	if count, b, err = uvarint(b); err != nil {
		return err
	}
	f.KeyHashID = 0
	if count > 0 {
		if len(b) < keyHashIDSize {
			return ErrShort
		}
		f.KeyHashID = binary.LittleEndian.Uint32(b)
		b = b[keyHashIDSize:]
	}
	if count > uint64(len(b)/entryMin) {
		return ErrEntryCount
	}
	f.Keys = f.Keys[:0]
	for range count {
		if len(b) < entryMin {
			return ErrShort
		}
		key := binary.LittleEndian.Uint64(b)
		var n, refused uint64
		var level int64
		if n, b, err = uvarint(b[8:]); err != nil {
			return err
		}
		if refused, b, err = uvarint(b); err != nil {
			return err
		}
		if level, b, err = varint(b); err != nil {
			return err
		}
		if n > MaxTokens || refused > MaxTokens || n == 0 && refused == 0 || level > int64(MaxTokens) || level < -int64(MaxTokens) {
			return ErrTokens
		}
		f.Keys = append(f.Keys, KeyCount{key, int64(n), int64(refused), level})
	}
	if len(b) != 0 {
		return ErrTrailing
	}
	return nil
}

func varint(b []byte) (int64, []byte, error) {
	v, n := binary.Varint(b)
	if n <= 0 {
		if n == 0 {
			return 0, nil, ErrShort
		}
		return 0, nil, ErrVarint
	}
	return v, b[n:], nil
}

// uvarintAged reads a running total written in full.
func uvarintAged(b []byte) (uint64, []byte, error) {
	v, b, err := uvarint(b)
	if err != nil {
		return 0, nil, err
	}
	if v, err = unage(v); err != nil {
		return 0, nil, err
	}
	return v, b, nil
}

func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		if n == 0 {
			return 0, nil, ErrShort
		}
		return 0, nil, ErrVarint
	}
	return v, b[n:], nil
}

// Relay is one relay envelope, opened: frames of Origin's, passed on by
// another node. Its slices point into the envelope.
type Relay struct {
	Origin []byte
	// Spread marks the last hop: the receiver passes it on to no one.
	Spread bool
	// Frames are the origin's frames, back to back; Next splits them.
	Frames []byte
}

// relayFixed is an envelope's fixed part: magic, version, flags and the
// origin's length.
const relayFixed = 2 + 1 + 1 + 1

// AppendRelay appends an envelope of frames (one or more whole frames of
// origin's, none an envelope) to b. origin must be 1 to MaxOrigin bytes.
func AppendRelay(b []byte, origin string, spread bool, frames []byte) []byte {
	flags := byte(flagRelay)
	if spread {
		flags |= flagSpread
	}
	b = append(b, magic0, magic1, Version, flags, byte(len(origin)))
	b = append(b, origin...)
	b = binary.AppendUvarint(b, uint64(len(frames)))
	return append(b, frames...)
}

// RelaySize is the size of an envelope of n bytes of frames from origin.
func RelaySize(origin string, n int) int {
	size := relayFixed + len(origin) + 1 + n
	for v := uint64(n); v >= 0x80; v >>= 7 {
		size++
	}
	return size
}

// IsRelay reports whether a piece that Next split off is an envelope.
func IsRelay(piece []byte) bool { return len(piece) > 3 && piece[3]&flagRelay != 0 }

// nextRelay is Next for an envelope or a digest: it finds its end.
func nextRelay(b []byte) (frame, rest []byte, err error) {
	if b[3]&flagDigest != 0 {
		return nextDigest(b)
	}
	n := int(b[4])
	at := relayFixed + n
	if n == 0 || len(b) < at {
		return nil, nil, ErrRelay
	}
	size, k := binary.Uvarint(b[at:])
	if k <= 0 || size < HeaderFixed || size > uint64(len(b)-at-k) {
		return nil, nil, ErrRelay
	}
	end := at + k + int(size)
	return b[:end], b[end:], nil
}

// OpenRelay reads one envelope (as Next split it off): its origin, its
// hop and its frames, each of which Next can split off (and Decode must
// still check). It refuses an envelope inside an envelope, an unknown
// flag and trailing bytes.
func OpenRelay(env []byte) (Relay, error) {
	if len(env) < relayFixed || env[0] != magic0 || env[1] != magic1 {
		return Relay{}, ErrMagic
	}
	if env[2] != Version {
		return Relay{}, ErrVersion
	}
	if env[3]&^(flagRelay|flagSpread) != 0 || env[3]&flagRelay == 0 {
		return Relay{}, ErrRelay
	}
	piece, rest, err := nextRelay(env)
	if err != nil || len(rest) != 0 || len(piece) != len(env) {
		return Relay{}, ErrRelay
	}
	n := int(env[4])
	r := Relay{Origin: env[relayFixed : relayFixed+n], Spread: env[3]&flagSpread != 0}
	_, k := binary.Uvarint(env[relayFixed+n:])
	r.Frames = env[relayFixed+n+k:]
	for b := r.Frames; len(b) > 0; {
		var f []byte
		if f, b, err = Next(b); err != nil {
			return Relay{}, err
		}
		if IsRelay(f) {
			return Relay{}, ErrRelay
		}
	}
	return r, nil
}

// A digest carries the running totals of several origins of one limiter,
// one entry each, in place of their frames: what a relay passes on to
// other groups of the frames that carry no keyed counts (those travel in
// envelopes, whole). An entry is a frame's fields without the magic, the
// version, the limiter (the digest's) and the keyed entries, after the
// origin's name as a hash (OriginHash), which every member can work out
// from its member list:
//
//	magic       2 bytes  "gp"
//	version     1 byte   11
//	flags       1 byte   bits 7 and 5 set; bit 6: the last hop
//	length      uv       of what follows
//	limiter     8 bytes
//	entries, to the end, each:
//	  origin      6 bytes  OriginHash of the origin's node name
//	  flags       1 byte   a frame's bits 0 to 2 (leaving, idle, partial);
//	                       bit 3: tagged; in a tagged entry, bits 4 and 5:
//	                       globalSum's width, 6 and 7: demandSum's
//	                       (0: in full; 1, 2, 3: its low 7, 14, 21 bits)
//	  incarnation 8 bytes, or when tagged 2: IncarnationTag of it
//	  globalSum, global, demandSum (uv), level (sv), withheld (uv): as in
//	  a frame, but a total with a width is its low bits
//
// An entry takes about 23 bytes, 17 tagged, where the frame in an
// envelope took 43. A tagged entry stands for the stream of its origin's
// whose incarnation has that tag: the receiver must have heard the
// incarnation whole before (the relays send it whole now and then), and
// drops the entry otherwise; its running totals come again. A truncated
// total is widened (Widen) from the receiver's last total of that stream,
// which must be recent: a relay truncates a total only to a width whose
// half exceeds twice its growth over the last two horizons (core's
// relays), so that the running totals of a long-running cluster, which
// take four or five bytes each in full, take two or three in most
// entries, as a young cluster's do.

// Digest is one digest, opened. Its slice points into the digest.
type Digest struct {
	Limiter uint64
	// Spread marks the last hop: the receiver passes it on to no one.
	Spread bool
	// Entries are the entries, back to back; NextEntry splits them.
	Entries []byte
}

// digestFixed is a digest's fixed part bar its length: magic, version,
// flags.
const digestFixed = 2 + 1 + 1

// digestEntryFixed is an untagged digest entry's fixed part: origin,
// flags, incarnation; digestEntryMin a tagged entry's, the least an entry takes.
const (
	digestEntryFixed = originSize + 1 + 8
	digestEntryMin   = originSize + 1 + 2
)

// DigestEntryMax is the largest encoded entry.
const DigestEntryMax = digestEntryFixed + 5*binary.MaxVarintLen64

// IncarnationTag is the 2-byte tag that stands for incarnation inc in a
// tagged digest entry: its four 16-bit parts folded together, so that
// start times a few seconds apart get different tags.
func IncarnationTag(inc uint64) uint16 {
	return uint16(inc ^ inc>>16 ^ inc>>32 ^ inc>>48)
}

// Entry is what a digest entry says besides its frame's fields: its
// origin, its incarnation's tag when it is tagged (the frame's
// Incarnation is then 0), and how many low bits of each running total it
// carries when it carries them truncated (0: in full).
type Entry struct {
	Origin uint64
	Tagged bool
	Tag    uint16
	// GlobalBits and DemandBits are 0, or one of TotalBits' widths when
	// the entry is tagged: the frame's GlobalSum (DemandSum) is then the
	// total's low bits, which Widen makes whole again.
	GlobalBits, DemandBits uint8
}

// totalWidths are the widths a truncated running total may have, the
// classes 1 to 3 of an entry's flag bits 4 and 5 (globalSum) and 6 and 7
// (demandSum); class 0 is a total in full. Each fills whole varint bytes
// (one, two, three).
var totalWidths = [4]uint8{0, 7, 14, 21}

// TotalBits is the width to truncate a running total to, such that a
// receiver whose last total of the stream is within spread of it (either
// side) widens it exactly: the narrowest of 7, 14 and 21 bits with
// 2^(bits-1) > spread, and only when that is shorter than total in full;
// otherwise 0 (send it in full).
func TotalBits(total, spread uint64) uint8 {
	for _, bits := range totalWidths[1:] {
		if spread < 1<<(bits-1) {
			if uvarintLen(total+agedTotals.Load()) <= int(bits)/7 {
				return 0
			}
			return bits
		}
	}
	return 0
}

// Widen is the running total whose low bits are low, a total truncated to
// bits bits, that lies nearest base (the receiver's last total of the
// stream): exact when the true total is within 2^(bits-1) of base. It
// reports false when that total would be below zero (base is not the
// stream's).
func Widen(low uint64, bits uint8, base uint64) (uint64, bool) {
	mask := uint64(1)<<bits - 1
	ahead := (low - base) & mask
	if ahead < 1<<(bits-1) {
		return base + ahead, base+ahead >= base
	}
	behind := mask + 1 - ahead
	return base - behind, behind <= base
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func widthClass(bits uint8) byte {
	for c, w := range totalWidths {
		if w == bits {
			return byte(c)
		}
	}
	panic("wire: not a total width")
}

// originSize is how many bytes of OriginHash an entry carries: 48 bits,
// so that two of 1,000 names share a hash with odds of about 2 in a
// billion (and such names are dropped, not confused: core's relays).
const originSize = 6

// OriginHash is the hash that names a node in a digest: FNV-1a of its
// name, its low 48 bits.
func OriginHash(name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return h & (1<<(8*originSize) - 1)
}

// AppendDigestEntry appends the entry of f (its keyed entries, sequence
// number and limiter are not part of it) from e.Origin; when e.Tagged,
// the incarnation goes as e.Tag (f's is not read), and its running totals
// as their low e.GlobalBits and e.DemandBits bits when those are set
// (TotalBits).
func AppendDigestEntry(b []byte, e Entry, f *Frame) []byte {
	b = appendUint48(b, e.Origin)
	global, demand := f.GlobalSum+agedTotals.Load(), f.DemandSum+agedTotals.Load()
	if e.Tagged {
		flags := frameFlags(f) | flagTagged | widthClass(e.GlobalBits)<<4 | widthClass(e.DemandBits)<<6
		b = append(b, flags)
		b = binary.LittleEndian.AppendUint16(b, e.Tag)
		if e.GlobalBits != 0 {
			global = f.GlobalSum & (1<<e.GlobalBits - 1)
		}
		if e.DemandBits != 0 {
			demand = f.DemandSum & (1<<e.DemandBits - 1)
		}
	} else {
		b = append(b, frameFlags(f))
		b = binary.LittleEndian.AppendUint64(b, f.Incarnation)
	}
	b = binary.AppendUvarint(b, global)
	b = binary.AppendUvarint(b, uint64(f.Global))
	b = binary.AppendUvarint(b, demand)
	b = binary.AppendVarint(b, f.Level)
	return binary.AppendUvarint(b, f.Withheld)
}

// AppendDigest appends a digest of limiter's entries (one or more, as
// AppendDigestEntry wrote them) to b.
func AppendDigest(b []byte, spread bool, limiter uint64, entries []byte) []byte {
	flags := byte(flagRelay | flagDigest)
	if spread {
		flags |= flagSpread
	}
	b = append(b, magic0, magic1, Version, flags)
	b = binary.AppendUvarint(b, uint64(8+len(entries)))
	b = binary.LittleEndian.AppendUint64(b, limiter)
	return append(b, entries...)
}

// DigestSize is the size of a digest of n bytes of entries.
func DigestSize(n int) int {
	size := digestFixed + 1 + 8 + n
	for v := uint64(8 + n); v >= 0x80; v >>= 7 {
		size++
	}
	return size
}

// IsDigest reports whether a piece that Next split off is a digest.
func IsDigest(piece []byte) bool {
	return len(piece) > 3 && piece[3]&(flagRelay|flagDigest) == flagRelay|flagDigest
}

// Spread returns a copy of digest d (as Next split it off) marked as on
// its last hop, appended to b.
func Spread(b []byte, d []byte) []byte {
	b = append(b, d...)
	b[len(b)-len(d)+3] |= flagSpread
	return b
}

// DigestBody returns the limiter and the entries of a digest that Next
// split off and that was opened or written before (it checks nothing).
func DigestBody(d []byte) (limiter uint64, entries []byte) {
	_, k := binary.Uvarint(d[digestFixed:])
	body := d[digestFixed+k:]
	return binary.LittleEndian.Uint64(body), body[8:]
}

// nextDigest is Next for a digest.
func nextDigest(b []byte) (frame, rest []byte, err error) {
	size, k := binary.Uvarint(b[digestFixed:])
	if k <= 0 || size < 8+digestEntryMin || size > uint64(len(b)-digestFixed-k) {
		return nil, nil, ErrDigest
	}
	end := digestFixed + k + int(size)
	return b[:end], b[end:], nil
}

// OpenDigest reads one digest (as Next split it off): its limiter, its
// hop and its entries, every one of which it checks, as Decode checks a
// frame. It refuses an unknown flag and trailing bytes.
func OpenDigest(d []byte) (Digest, error) {
	if len(d) < digestFixed+1 || d[0] != magic0 || d[1] != magic1 {
		return Digest{}, ErrMagic
	}
	if d[2] != Version {
		return Digest{}, ErrVersion
	}
	if d[3]&^(flagRelay|flagDigest|flagSpread) != 0 || !IsDigest(d) {
		return Digest{}, ErrDigest
	}
	piece, rest, err := nextDigest(d)
	if err != nil || len(rest) != 0 || len(piece) != len(d) {
		return Digest{}, ErrDigest
	}
	_, k := binary.Uvarint(d[digestFixed:])
	body := d[digestFixed+k:]
	out := Digest{Limiter: binary.LittleEndian.Uint64(body), Spread: d[3]&flagSpread != 0, Entries: body[8:]}
	var f Frame
	for b := out.Entries; len(b) > 0; {
		if _, b, err = NextEntry(b, &f); err != nil {
			return Digest{}, err
		}
	}
	return out, nil
}

// NextEntry reads the first entry of b into f (Seq 0, no keyed entries;
// the caller sets the limiter; Incarnation 0 when the entry is tagged;
// GlobalSum and DemandSum their low bits when e says they are truncated)
// and returns its origin, tag and widths, and what follows. It refuses
// what Decode would refuse in a frame.
func NextEntry(b []byte, f *Frame) (e Entry, rest []byte, err error) {
	if len(b) < digestEntryMin {
		return Entry{}, nil, ErrShort
	}
	e.Origin = uint48(b)
	flags := b[originSize]
	if flags&flagTagged == 0 && flags>>4 != 0 {
		return Entry{}, nil, ErrDigest // truncated totals only in a tagged entry
	}
	*f = Frame{Leaving: flags&flagLeaving != 0, Idle: flags&flagIdle != 0, Partial: flags&flagPartial != 0,
		Limiter: f.Limiter, Keys: f.Keys[:0]}
	if flags&flagTagged != 0 {
		e.Tagged, e.Tag = true, binary.LittleEndian.Uint16(b[originSize+1:])
		e.GlobalBits, e.DemandBits = totalWidths[flags>>4&3], totalWidths[flags>>6]
		b = b[digestEntryMin:]
	} else {
		if len(b) < digestEntryFixed {
			return Entry{}, nil, ErrShort
		}
		f.Incarnation = binary.LittleEndian.Uint64(b[originSize+1:])
		b = b[digestEntryFixed:]
	}
	if f.GlobalSum, b, err = entryTotal(b, e.GlobalBits); err != nil {
		return Entry{}, nil, err
	}
	var g uint64
	if g, b, err = uvarint(b); err != nil {
		return Entry{}, nil, err
	}
	if g > MaxTokens || e.GlobalBits == 0 && g > f.GlobalSum {
		return Entry{}, nil, ErrTokens
	}
	f.Global = int64(g)
	if f.DemandSum, b, err = entryTotal(b, e.DemandBits); err != nil {
		return Entry{}, nil, err
	}
	if f.Level, b, err = varint(b); err != nil {
		return Entry{}, nil, err
	}
	if f.Withheld, b, err = uvarint(b); err != nil {
		return Entry{}, nil, err
	}
	if f.Withheld > WithheldOne {
		return Entry{}, nil, ErrTokens
	}
	return e, b, nil
}

// entryTotal reads a running total of a digest entry: in full when bits
// is 0, else its low bits.
func entryTotal(b []byte, bits uint8) (uint64, []byte, error) {
	if bits == 0 {
		return uvarintAged(b)
	}
	v, b, err := uvarint(b)
	if err == nil && v >= 1<<bits {
		err = ErrTokens
	}
	return v, b, err
}

// appendUint48 appends the low 48 bits of v, little-endian.
func appendUint48(b []byte, v uint64) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40))
}

// uint48 reads 48 bits, little-endian, from b (at least 6 bytes).
func uint48(b []byte) uint64 {
	_ = b[5]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 | uint64(b[4])<<32 | uint64(b[5])<<40
}
