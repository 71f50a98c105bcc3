package datagram

import (
	"slices"

	"github.com/pedreviljoen/gopherpace/core/internal/wire"
)

// Own entries: in a grouped cluster a node sends its mates its frames of
// running totals (heartbeats and reports: no keyed counts) as digest
// entries, the form other groups' frames reach them in, not as frames.
// An entry leaves out the frame's magic, version, limiter, sequence number
// and key count, names the incarnation by its tag and truncates the
// totals as a relay's entries do; riding in a digest of
// its limiter that goes to the mates anyway, it costs about 14 bytes
// where the frame cost 28 (a month into a cluster's life, 14 against 36).
// At N = 1,000 these heartbeats were a fifth of a node's bytes.
//
// A mate takes an entry whose origin is the digest's sender as a frame
// from that sender (not relayed: its silence counts as a mate's), and
// passes it on to the groups it covers as it would the frame
// (hub.receiveDigest). Keyed frames still go whole: their counts are
// deltas, ordered by sequence number.
//
// ownEntries belongs to its hub's relays and is under the hub's lock.
type ownEntries struct {
	// streams are this node's own, one per limiter: when each went whole
	// to the mates, and the marks its totals are truncated from.
	streams []latestEntry
	keyed   []byte // the flush's frames that go whole
	// entries are the flush's entries, by limiter, in the order of
	// their first frame.
	entries []limiterEntries
	into    []int // where each limiter's entries go (merge)
	merged  []byte
	both    []byte // scratch: a digest's entries and this node's
}

type limiterEntries struct {
	limiter uint64
	entries []byte
}

// stream is this node's stream of f's limiter, following f.
func (o *ownEntries) stream(self string, f *wire.Frame, now, tick int64) *latestEntry {
	i := slices.IndexFunc(o.streams, func(h latestEntry) bool { return h.stream.limiter == f.Limiter })
	if i < 0 {
		i = len(o.streams)
		o.streams = append(o.streams, latestEntry{stream: relayStream{self, f.Limiter}, hash: wire.OriginHash(self)})
	}
	h := &o.streams[i]
	h.follow(f, now, tick)
	return h
}

// split takes this node's pending frames (pending: its limiters' frames
// for one datagram) apart: the keyed ones, which go whole, and the
// others, which become entries, whole or tagged by the rules of a relay's
// (dueLatest): whole for wholeSettle after the stream starts or the
// members change (wholeUntil), and at least every wholeEvery.
func (o *ownEntries) split(self string, pending []byte, now, tick, wholeUntil int64) {
	o.keyed, o.entries = o.keyed[:0], o.entries[:0]
	var f wire.Frame
	for b := pending; len(b) > 0; {
		frame, rest, err := wire.Next(b)
		if err != nil {
			break // cannot happen: this node's limiters wrote them
		}
		b = rest
		if wire.IsRelay(frame) || wire.Decode(frame, &f) != nil || f.Seq != 0 || len(f.Keys) > 0 {
			o.keyed = append(o.keyed, frame...)
			continue
		}
		e := o.stream(self, &f, now, tick).entry(now, quietEvery(tick), wholeUntil)
		i := 0
		for i < len(o.entries) && o.entries[i].limiter != f.Limiter {
			i++
		}
		if i == len(o.entries) {
			if i < cap(o.entries) {
				o.entries = o.entries[:i+1]
				o.entries[i].limiter, o.entries[i].entries = f.Limiter, o.entries[i].entries[:0]
			} else {
				o.entries = append(o.entries, limiterEntries{limiter: f.Limiter})
			}
		}
		o.entries[i].entries = wire.AppendDigestEntry(o.entries[i].entries, e, &f)
	}
}

// merge returns the digests and envelopes for the mates (toMates, as the
// relays queued them) with the entries of split in them, ahead of the
// rest as the frames went: each limiter's at the head of the first digest
// of its limiter that has room, or in a digest of their own, first.
func (o *ownEntries) merge(toMates []byte, maxDatagram int) []byte {
	if len(o.entries) == 0 {
		return toMates
	}
	// Where each limiter's entries go: the offset in toMates of the digest
	// they join, or -1 for one of their own.
	o.into = o.into[:0]
	for _, le := range o.entries {
		at := -1
		for b := toMates; len(b) > 0; {
			piece, rest, err := wire.Next(b)
			if err != nil {
				break // cannot happen: the relays wrote them
			}
			if wire.IsDigest(piece) {
				limiter, entries := wire.DigestBody(piece)
				if limiter == le.limiter && wire.DigestSize(len(entries)+len(le.entries)) <= maxDatagram {
					at = len(toMates) - len(b)
					break
				}
			}
			b = rest
		}
		o.into = append(o.into, at)
	}
	out := o.merged[:0]
	for i, le := range o.entries {
		if o.into[i] < 0 {
			out = wire.AppendDigest(out, true, le.limiter, le.entries)
		}
	}
	for b := toMates; len(b) > 0; {
		at := len(toMates) - len(b)
		piece, rest, err := wire.Next(b)
		if err != nil {
			break
		}
		b = rest
		i := slices.Index(o.into, at)
		if i < 0 {
			out = append(out, piece...)
			continue
		}
		limiter, entries := wire.DigestBody(piece)
		o.both = append(append(o.both[:0], o.entries[i].entries...), entries...)
		out = wire.AppendDigest(out, true, limiter, o.both)
	}
	o.merged = out
	return out
}
