package gopherpace

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// In a storm of 429s the first question is "who?". With WithTopKeys a
// limiter keeps a bounded summary of the keys it denies most, and of the
// keys it admits most (one admit in 64, chosen at random), by
// the Space-Saving algorithm: topShards shards by key hash, each holding
// topPerShard counters, so memory stays fixed whatever the keys. A key's
// count is over-estimated by at most its Error, which is at most the
// shard's requests over topPerShard. Keys may be personal data: unless
// shown, a key appears as its keyed hash (the hash the limiter buckets it
// by), which no one can read back without the limiter's secret.

const (
	topShards   = 16
	topPerShard = 16
	// admitSample: one admit in this many, chosen at random, is counted
	// (weighted by it).
	admitSample = 64
)

// A KeyCount is one key of a top-keys summary: the key (or "#" and its
// hash in hex, unless shown), its tokens counted, and how far that count
// may be over the truth.
type KeyCount struct {
	Key   string `json:"key"`
	Count uint64 `json:"count"`
	Error uint64 `json:"error"`
}

// WithTopKeys keeps a bounded summary of the keys this limiter denies
// most and admits most (TopKeys). show keeps the keys as the application
// gives them (at most 128 bytes of each); otherwise each is shown by its
// keyed hash. It holds at most 1,024 counters a limiter (about 40 KB, and
// up to 128 KB more of keys when shown); a keyed decision costs a second
// hash of the key and a lock of one of 16 shards on a denial and on one
// admit in 64 (BenchmarkTopKeys). Clustered, the limiter sends its peers
// its TopKeysSent heaviest of each list every second while it has any,
// by hash alone (docs/operations.md gives the bytes), for ClusterTopKeys.
func WithTopKeys(show bool) Option {
	return func(c *config) { c.topKeys, c.topShown = true, show }
}

// topKeys is a limiter's two summaries.
type topKeys struct {
	show             bool
	denied, admitted summary
}

type summary [topShards]topShard

// A topShard counts the keys of its hashes in the current window of
// topWindow and keeps the previous window's counts, so that a listing
// covers the last one to two windows: a storm that ended ten minutes ago
// has left it.
type topShard struct {
	mu        sync.Mutex
	window    int64      // now / topWindow of cur
	cur, prev []topEntry // at most topPerShard each
}

type topEntry struct {
	h            uint64
	key          string
	count, error uint64
}

// topWindow is the span one window of counts covers.
const topWindow = int64(time.Minute)

// roll moves sh to the window of now; sh.mu is held.
func (sh *topShard) roll(now int64) {
	w := now / topWindow
	if w <= sh.window {
		return
	}
	if w == sh.window+1 {
		sh.prev, sh.cur = sh.cur, sh.prev[:0]
	} else {
		sh.prev, sh.cur = sh.prev[:0], sh.cur[:0]
	}
	sh.window = w
}

// record counts n tokens of the key with hash h, decided at now.
func (t *topKeys) record(h uint64, key string, n int64, allowed bool, now int64) {
	if n < 1 {
		return
	}
	s := &t.denied
	if allowed {
		if rand.Uint32()%admitSample != 0 {
			return
		}
		s, n = &t.admitted, n*admitSample
	}
	sh := &s[h%topShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.roll(now)
	for i := range sh.cur {
		if sh.cur[i].h == h {
			sh.cur[i].count += uint64(n)
			return
		}
	}
	e := topEntry{h: h, count: uint64(n)}
	if t.show {
		e.key = strings.Clone(key[:min(len(key), maxShownKey)]) // the caller's bytes may be reused
	}
	if len(sh.cur) < topPerShard {
		sh.cur = append(sh.cur, e)
		return
	}
	// Space-Saving: the new key takes the place of the smallest count and
	// inherits it, as the error of its own.
	least := 0
	for i := range sh.cur {
		if sh.cur[i].count < sh.cur[least].count {
			least = i
		}
	}
	old := sh.cur[least].count
	e.count, e.error = old+uint64(n), old
	sh.cur[least] = e
}

// maxShownKey bounds the bytes of a key a listing shows.
const maxShownKey = 128

// top lists the n largest counts of s over the windows of now, largest
// first.
func (t *topKeys) top(s *summary, now int64, n int) []KeyCount {
	return sortTop(slices.Collect(maps.Values(t.counts(s, now))), n)
}

// counts are s's counts over the windows of now, by key hash.
func (t *topKeys) counts(s *summary, now int64) map[uint64]KeyCount {
	byHash := map[uint64]KeyCount{}
	for i := range s {
		sh := &s[i]
		sh.mu.Lock()
		sh.roll(now)
		for _, list := range [2][]topEntry{sh.prev, sh.cur} {
			for _, e := range list {
				k := byHash[e.h]
				k.Key, k.Count, k.Error = e.key, k.Count+e.count, k.Error+e.error
				if !t.show {
					k.Key = hashedKey(e.h)
				}
				byHash[e.h] = k
			}
		}
		sh.mu.Unlock()
	}
	return byHash
}

// addPeerCount adds another node's count of the key with hash h to counts; a
// key this node has not counted is listed by its hash, since its text is
// the other node's alone.
func addPeerCount(counts map[uint64]KeyCount, h, count, error uint64) {
	k, ok := counts[h]
	if !ok {
		k.Key = hashedKey(h)
	}
	k.Count, k.Error = k.Count+count, k.Error+error
	counts[h] = k
}

// hashedKey is how a key is listed by its hash: not shown, or not known
// on this node.
func hashedKey(h uint64) string { return "#" + strconv.FormatUint(h, 16) }

func sortTop(all []KeyCount, n int) []KeyCount {
	slices.SortFunc(all, func(a, b KeyCount) int {
		switch {
		case a.Count > b.Count:
			return -1
		case a.Count < b.Count:
			return 1
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return all[:min(n, len(all))]
}

// TopKeys lists the n keys this limiter denied the most tokens to over
// the last one to two minutes (the current minute and the one before),
// and the n it admitted the most (estimated from one admit in 64),
// largest first; nil without WithTopKeys. Each count may be over the
// truth by at most its Error.
func (l *Limiter) TopKeys(n int) (denied, admitted []KeyCount) {
	return l.topKeys(int64(time.Since(l.epoch)), n)
}

// TopKeysAt is TopKeys at the given time.
func (l *Limiter) TopKeysAt(now time.Time, n int) (denied, admitted []KeyCount) {
	return l.topKeys(l.nanos(now), n)
}

func (l *Limiter) topKeys(now int64, n int) (denied, admitted []KeyCount) {
	if l.top == nil || n < 1 {
		return nil, nil
	}
	return l.top.top(&l.top.denied, now, n), l.top.top(&l.top.admitted, now, n)
}

// ClusterTopKeys lists the n keys the whole cluster denied the most
// tokens to over the last one to two minutes, and the n it admitted the
// most: this node's TopKeys summed with what each peer sent last (every
// second while it has any, its TopKeysSent heaviest of each list, by key
// hash alone). A key only other nodes saw is listed by its hash. A count
// is over the truth by at most its Error, and under it by at most the
// smallest count sent by each node that did not send the key. Standalone
// it is TopKeys; nil without WithTopKeys.
func (l *Limiter) ClusterTopKeys(n int) (denied, admitted []KeyCount) {
	return l.clusterTopKeys(int64(time.Since(l.epoch)), n)
}

// ClusterTopKeysAt is ClusterTopKeys at the given time.
func (l *Limiter) ClusterTopKeysAt(now time.Time, n int) (denied, admitted []KeyCount) {
	return l.clusterTopKeys(l.nanos(now), n)
}

func (l *Limiter) clusterTopKeys(now int64, n int) (denied, admitted []KeyCount) {
	if l.topGossip == nil || n < 1 {
		return l.topKeys(now, n)
	}
	return l.topGossip.merge(now, n)
}

// MergeTopKeys merges the top-keys lists of several nodes into the n
// largest, summing each key's counts and errors: a cluster's heaviest
// keys, from each node's TopKeys.
func MergeTopKeys(n int, lists ...[]KeyCount) []KeyCount {
	byKey := map[string]KeyCount{}
	for _, l := range lists {
		for _, k := range l {
			m := byKey[k.Key]
			m.Key, m.Count, m.Error = k.Key, m.Count+k.Count, m.Error+k.Error
			byKey[k.Key] = m
		}
	}
	all := make([]KeyCount, 0, len(byKey))
	for _, k := range byKey {
		all = append(all, k)
	}
	return sortTop(all, n)
}
