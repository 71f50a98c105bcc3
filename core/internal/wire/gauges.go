package wire

import (
	"encoding/binary"
	"errors"
)

// A gauge frame is an in-flight limiter's report: how many requests the
// sender has in flight per key now, and how often it is asked for each.
// Unlike a rate limiter's counts, these are levels, not deltas: a newer
// frame replaces an older one, so a lost frame costs nothing once the
// next arrives. It is laid out as a frame (flag bit 4 set), so that Next
// finds its end and a node without the limiter it names skips it:
//
//	magic, version, flags, limiter, incarnation   as a frame's; flags bit 4
//	                     set, bit 0 when the sender is leaving
//	seq         uv       per-sender sequence number, from 1
//	round       uv       the sender's tick when it wrote the frame: every
//	                     tick it reports every key it holds or is asked
//	                     for, so a key it left out of two whole rounds
//	                     has nothing in flight there
//	acquired    uv       requests the sender let in since it started
//	attempts    uv       requests asked of it since it started, let in or not
//	zero        2 bytes  0, 0
//	count       uv       number of entries that follow
//	keyHashID   4 bytes  only when count is above 0, as in a frame
//	entries     count × (key hash 8 bytes, in flight uv, demand uv,
//	            refusing uv): the sender's requests in flight for the key,
//	            how many a second it is asked for (its offered load, for
//	            sharing the limit fairly) and how many a second it refuses;
//	            key hash 0 is the limiter's keyless limit
//
// A limiter's top keys (WithTopKeys) travel in gauge frames too, under
// the limiter's top-keys ID: round numbers the sender's sends (the frames
// of one send replace the last send's), and each entry is one key of its
// lists, in flight its count of tokens, demand the count's error, and
// refusing the list (0 denied, 1 admitted).
//
// A gauge frame is never a rate limiter's: Decode refuses one (ErrGauges),
// and DecodeGauges refuses anything else.
const flagGauges = 1 << 4

// ErrGauges is Decode's refusal of a gauge frame, and DecodeGauges' of a
// frame that is not one.
var ErrGauges = errors.New("gopherpace: a gauge frame where a frame was due, or the other way round")

// MaxInFlight bounds every count of a gauge frame: no limit is larger.
const MaxInFlight = int64(1) << 40

// Gauge is one key's entry in a gauge frame.
type Gauge struct {
	Key      uint64
	InFlight int64
	Demand   int64 // requests asked a second
	Refusing int64 // requests refused a second
}

// GaugeFrame is one decoded gauge frame; see the package comment at
// flagGauges for each field.
type GaugeFrame struct {
	Leaving     bool
	Limiter     uint64
	Incarnation uint64
	Seq, Round  uint64
	Acquired    uint64
	Attempts    uint64
	KeyHashID   uint32
	Gauges      []Gauge
}

// IsGauges reports whether a frame Next split off is a gauge frame.
func IsGauges(frame []byte) bool {
	return len(frame) > 3 && frame[3]&(flagRelay|flagGauges) == flagGauges
}

// GaugeEntryMax is the largest encoded gauge entry.
const GaugeEntryMax = 8 + 3*binary.MaxVarintLen64

// AppendGaugeHeader encodes every field of f but the entries; the caller
// appends count entries with AppendGauge.
func AppendGaugeHeader(b []byte, f *GaugeFrame, count int) []byte {
	flags := byte(flagGauges)
	if f.Leaving {
		flags |= flagLeaving
	}
	b = append(b, magic0, magic1, Version, flags)
	b = binary.LittleEndian.AppendUint64(b, f.Limiter)
	b = binary.LittleEndian.AppendUint64(b, f.Incarnation)
	b = binary.AppendUvarint(b, f.Seq)
	b = binary.AppendUvarint(b, f.Round)
	b = binary.AppendUvarint(b, f.Acquired)
	b = binary.AppendUvarint(b, f.Attempts)
	b = append(b, 0, 0)
	b = binary.AppendUvarint(b, uint64(count))
	if count > 0 {
		b = binary.LittleEndian.AppendUint32(b, f.KeyHashID)
	}
	return b
}

// AppendGauge encodes one entry.
func AppendGauge(b []byte, g Gauge) []byte {
	b = binary.LittleEndian.AppendUint64(b, g.Key)
	b = binary.AppendUvarint(b, uint64(g.InFlight))
	b = binary.AppendUvarint(b, uint64(g.Demand))
	return binary.AppendUvarint(b, uint64(g.Refusing))
}

// DecodeGauges parses b, one gauge frame, into f, reusing f.Gauges. It
// refuses anything that is not exactly one well-formed gauge frame of this
// version; on an error f holds nothing to rely on.
func DecodeGauges(b []byte, f *GaugeFrame) error {
	frame, rest, err := Next(b)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return ErrTrailing
	}
	if !IsGauges(frame) {
		return ErrGauges
	}
	f.Leaving = b[3]&flagLeaving != 0
	f.Limiter = binary.LittleEndian.Uint64(b[4:])
	f.Incarnation = binary.LittleEndian.Uint64(b[12:])
	b = b[HeaderFixed:]
	var zero [2]uint64
	var count uint64
	for i, to := range []*uint64{&f.Seq, &f.Round, &f.Acquired, &f.Attempts, &zero[0], &zero[1], &count} {
		if *to, b, err = uvarint(b); err != nil {
			return err
		}
		if i == 0 && f.Seq == 0 {
			return ErrTokens
		}
	}
	if zero != [2]uint64{} {
		return ErrTokens
	}
	f.KeyHashID = 0
	if count > 0 {
		f.KeyHashID = binary.LittleEndian.Uint32(b)
		b = b[keyHashIDSize:]
	}
	f.Gauges = f.Gauges[:0]
	for range count {
		g := Gauge{Key: binary.LittleEndian.Uint64(b)}
		var inFlight, demand, refusing uint64
		if inFlight, b, err = uvarint(b[8:]); err != nil {
			return err
		}
		if demand, b, err = uvarint(b); err != nil {
			return err
		}
		if refusing, b, err = uvarint(b); err != nil {
			return err
		}
		if inFlight > uint64(MaxInFlight) || demand > uint64(MaxInFlight) || refusing > uint64(MaxInFlight) {
			return ErrTokens
		}
		g.InFlight, g.Demand, g.Refusing = int64(inFlight), int64(demand), int64(refusing)
		f.Gauges = append(f.Gauges, g)
	}
	return nil
}
