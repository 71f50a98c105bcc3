package gopherpace

import (
	"encoding/binary"
	"errors"
)

// Wire format of one frame, version 2. Integers are little-endian or
// unsigned varints (uv).
//
//	magic      2 bytes  "gp"
//	version    1 byte   1
//	flags      1 byte   bit 0: the sender is leaving the cluster
//	limiter    8 bytes  hash of the limiter ID, so limiters can share a transport
//	incarnation 8 bytes the sender's start time; a restart gets a new one
//	seq        uv       per-sender sequence number of frames with keyed
//	                    entries, for de-duplication; 0 on other frames
//	globalSum  uv       tokens the sender admitted from the global bucket
//	                    since it started: every frame carries it, so a lost
//	                    frame's count arrives with the next one
//	global     uv       of which admitted since the sender's previous flush
//	demandSum  uv       tokens requested from the global bucket since the
//	                    sender started, admitted or not: the sender's
//	                    offered load, for sharing the bucket fairly
//	level      sv       tokens left in the sender's replica of the global
//	                    bucket when it sent the frame (negative: debt), as
//	                    a zigzag varint
//	withheld   uv       the share of the refill the sender withholds for
//	                    peers out of its sight, in 65536ths
//	count      uv       number of keyed entries that follow
//	entries    count × (key hash 8 bytes, tokens uv)
//
// A keyed entry takes 9 bytes while its count is below 128, 10 below 16384.
const (
	wireMagic0  = 'g'
	wireMagic1  = 'p'
	wireVersion = 2
	flagLeaving = 1 << 0
	// headerMax is the largest possible header: the fixed part plus seven
	// 10-byte varints.
	headerFixed = 2 + 1 + 1 + 8 + 8
	headerMax   = headerFixed + 7*binary.MaxVarintLen64
	// entryMax is the largest encoded keyed entry.
	entryMax = 8 + binary.MaxVarintLen64
	// maxWireTokens bounds a count from the network: more than any bucket
	// can hold (maxTolerance at one token per nanosecond).
	maxWireTokens = uint64(maxTolerance)
	// withheldOne is the whole refill, in the units of the withheld field.
	withheldOne = 1 << 16
)

type keyCount struct {
	key    uint64
	tokens int64
}

type frame struct {
	leaving     bool
	limiter     uint64
	incarnation uint64
	seq         uint64
	globalSum   uint64
	global      int64
	demandSum   uint64
	level       int64
	withheld    uint64 // 65536ths
	keys        []keyCount
}

var (
	errShort      = errors.New("gopherpace: frame truncated")
	errMagic      = errors.New("gopherpace: not a gopherpace frame")
	errVersion    = errors.New("gopherpace: unknown frame version")
	errVarint     = errors.New("gopherpace: bad varint in frame")
	errTokens     = errors.New("gopherpace: token count out of range")
	errTrailing   = errors.New("gopherpace: trailing bytes in frame")
	errEntryCount = errors.New("gopherpace: entry count exceeds frame size")
)

// appendHeader encodes every field of f but the entries; the caller appends
// count entries with appendEntry.
func appendHeader(b []byte, f *frame, count int) []byte {
	flags := byte(0)
	if f.leaving {
		flags |= flagLeaving
	}
	b = append(b, wireMagic0, wireMagic1, wireVersion, flags)
	b = binary.LittleEndian.AppendUint64(b, f.limiter)
	b = binary.LittleEndian.AppendUint64(b, f.incarnation)
	b = binary.AppendUvarint(b, f.seq)
	b = binary.AppendUvarint(b, f.globalSum)
	b = binary.AppendUvarint(b, uint64(f.global))
	b = binary.AppendUvarint(b, f.demandSum)
	b = binary.AppendVarint(b, f.level)
	b = binary.AppendUvarint(b, f.withheld)
	return binary.AppendUvarint(b, uint64(count))
}

func appendEntry(b []byte, kc keyCount) []byte {
	b = binary.LittleEndian.AppendUint64(b, kc.key)
	return binary.AppendUvarint(b, uint64(kc.tokens))
}

func entrySize(kc keyCount) int {
	n := 9
	for v := uint64(kc.tokens); v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// decodeFrame parses b into f, reusing f.keys. It rejects anything that is
// not exactly one well-formed version-2 frame.
func decodeFrame(b []byte, f *frame) error {
	if len(b) < headerFixed {
		if len(b) >= 2 && (b[0] != wireMagic0 || b[1] != wireMagic1) {
			return errMagic
		}
		return errShort
	}
	if b[0] != wireMagic0 || b[1] != wireMagic1 {
		return errMagic
	}
	if b[2] != wireVersion {
		return errVersion
	}
	f.leaving = b[3]&flagLeaving != 0
	f.limiter = binary.LittleEndian.Uint64(b[4:])
	f.incarnation = binary.LittleEndian.Uint64(b[12:])
	b = b[headerFixed:]
	var err error
	if f.seq, b, err = uvarint(b); err != nil {
		return err
	}
	if f.globalSum, b, err = uvarint(b); err != nil {
		return err
	}
	var g uint64
	if g, b, err = uvarint(b); err != nil {
		return err
	}
	if g > maxWireTokens || g > f.globalSum {
		return errTokens
	}
	f.global = int64(g)
	if f.demandSum, b, err = uvarint(b); err != nil {
		return err
	}
	if f.level, b, err = varint(b); err != nil {
		return err
	}
	if f.withheld, b, err = uvarint(b); err != nil {
		return err
	}
	if f.withheld > withheldOne {
		return errTokens
	}
	var count uint64
	if count, b, err = uvarint(b); err != nil {
		return err
	}
	if count > uint64(len(b)/9) {
		return errEntryCount
	}
	f.keys = f.keys[:0]
	for range count {
		if len(b) < 9 {
			return errShort
		}
		key := binary.LittleEndian.Uint64(b)
		var n uint64
		if n, b, err = uvarint(b[8:]); err != nil {
			return err
		}
		if n == 0 || n > maxWireTokens {
			return errTokens
		}
		f.keys = append(f.keys, keyCount{key, int64(n)})
	}
	if len(b) != 0 {
		return errTrailing
	}
	return nil
}

func varint(b []byte) (int64, []byte, error) {
	v, n := binary.Varint(b)
	if n <= 0 {
		if n == 0 {
			return 0, nil, errShort
		}
		return 0, nil, errVarint
	}
	return v, b[n:], nil
}

func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		if n == 0 {
			return 0, nil, errShort
		}
		return 0, nil, errVarint
	}
	return v, b[n:], nil
}
