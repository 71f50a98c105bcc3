package gopherpace

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

// Looking a key's limit up (WithLookup): tenant tiers that live in a
// database. Each key's limit is looked up the first time the key is seen
// and again once its entry is older than the TTL, and kept in a bounded
// cache. Only a caller's request carries the key string, so only it looks
// up; peers' counts for a key (which carry its hash) use the cached limit,
// or the default one until a request of this node has looked it up.

// A Quota is a limit as WithRate and WithBucketSize give one: Tokens per
// Per, in a bucket of BucketSize tokens (bursts of up to that many).
type Quota struct {
	Tokens     int64
	Per        time.Duration
	BucketSize int64
}

// WithLookup looks each key's limit up with f: the first time a key is
// seen, and again after ttl. f reports false for keys on the limiter's
// own limit. Up to maxCached keys' limits are kept; when the cache is
// full, an arbitrary one of them is dropped to make room. An invalid
// Quota (one New would refuse) leaves the key on the default limit, with
// a WARN record at most every 30 s. f may be called for a key by several
// requests at once, and must be safe for that; it runs on the request
// path, so it should answer from memory. Overrides (WithOverride) win
// over f.
func WithLookup(f func(key string) (Quota, bool), maxCached int, ttl time.Duration) Option {
	return func(c *config) {
		switch {
		case f == nil:
			c.errs = append(c.errs, errorf("lookup func must not be nil"))
		case maxCached < 1:
			c.errs = append(c.errs, errorf("lookup cache must hold at least 1 key, got %d", maxCached))
		case ttl <= 0:
			c.errs = append(c.errs, errorf("lookup TTL must be > 0, got %v", ttl))
		}
		c.lookup = &lookupConfig{f, maxCached, ttl}
	}
}

type lookupConfig struct {
	f         func(string) (Quota, bool)
	maxCached int
	ttl       time.Duration
}

const lookupShards = 16

// lookupCache holds the looked-up rules by key hash.
type lookupCache struct {
	cfg      lookupConfig
	build    func(Quota) (*bucket.Rule, error)
	perShard int
	shards   [lookupShards]struct {
		mu sync.RWMutex
		m  map[uint64]lookedUp
	}
	lastWarn atomic.Int64
}

type lookedUp struct {
	rule    *bucket.Rule // nil: the default
	expires int64
}

func newLookupCache(cfg lookupConfig, build func(Quota) (*bucket.Rule, error)) *lookupCache {
	c := &lookupCache{cfg: cfg, build: build, perShard: max(1, cfg.maxCached/lookupShards)}
	for i := range c.shards {
		c.shards[i].m = make(map[uint64]lookedUp)
	}
	return c
}

// Cached is key hash h's looked-up rule, if any, whether or not its
// entry has expired.
func (c *lookupCache) Cached(h uint64) *bucket.Rule {
	sh := &c.shards[h%lookupShards]
	sh.mu.RLock()
	e := sh.m[h]
	sh.mu.RUnlock()
	return e.rule
}

// rule is key's rule at now, looking it up when its entry is missing
// or expired; changed reports the rule it had before when a new lookup
// changed it (the caller reprices the key's bucket).
func (c *lookupCache) rule(l *Limiter, h uint64, key string, now int64) (current, was *bucket.Rule, changed bool) {
	sh := &c.shards[h%lookupShards]
	sh.mu.RLock()
	e, ok := sh.m[h]
	sh.mu.RUnlock()
	if ok && now < e.expires {
		return e.rule, nil, false
	}
	// A copy goes to f, so that a caller's key (often built on its stack)
	// does not escape on every request for the rare lookup.
	k := strings.Clone(key)
	q, found := c.cfg.f(k)
	var np *bucket.Rule
	if found {
		var err error
		if np, err = c.build(q); err != nil {
			l.warnLookup(k, err)
			np = nil
		}
	}
	sh.mu.Lock()
	if len(sh.m) >= c.perShard && !ok {
		for k := range sh.m { // drop an arbitrary entry
			delete(sh.m, k)
			break
		}
	}
	sh.m[h] = lookedUp{np, now + int64(c.cfg.ttl)}
	sh.mu.Unlock()
	if ok && !sameRule(e.rule, np) {
		return np, e.rule, true
	}
	return np, nil, false
}

func sameRule(a, b *bucket.Rule) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Tokens == b.Tokens && a.Per == b.Per && a.BucketSize == b.BucketSize
}

// keyRule is the rule of key (hash h) for a caller's request at now:
// its override, else its looked-up limit (looking it up when due, and
// repricing its bucket when the limit changed), else the default.
func (l *Limiter) keyRule(h uint64, key string, now int64) *bucket.Rule {
	s := l.rules.Set()
	if s.Overrides != nil {
		if o, ok := s.Overrides[h]; ok && o.Key == key {
			return o.Rule
		}
	}
	c := l.lookup
	if c == nil {
		return s.Default
	}
	rule, was, changed := c.rule(l, h, key, now)
	if changed {
		l.repriceKey(now, h, orDefault(was, s.Default), orDefault(rule, s.Default))
	}
	return orDefault(rule, s.Default)
}

func orDefault(rule, def *bucket.Rule) *bucket.Rule {
	if rule == nil {
		return def
	}
	return rule
}

func (l *Limiter) warnLookup(key string, err error) {
	now := int64(time.Since(l.epoch))
	last := l.lookup.lastWarn.Load()
	if last != 0 && now-last < int64(30*time.Second) || !l.lookup.lastWarn.CompareAndSwap(last, now) {
		return
	}
	l.log.Warn("lookup gave an invalid limit; the key stays on the default", "node", l.name, "key", key, "error", err)
}
