package rlserver

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// A request may carry its own limit for a descriptor (Envoy sets it from
// route metadata: 10 a day for this route). As in envoyproxy/ratelimit, it
// replaces whatever the config says for that descriptor in a domain the
// config has, with a bucket per domain and full list of entries. Each
// distinct override rate gets a limiter of its own, made on first use and
// named by its rate, so replicas share it; at most maxOverrideRates of
// them, so that callers cannot make limiters without end.
const maxOverrideRates = 64

type overrideRate struct {
	requestsPerUnit, multiplier uint32
	unit                        rlspb.RateLimitResponse_RateLimit_Unit
}

// overrides holds the override rules, each with its limiter, for the
// service's life: a reload of the config keeps them.
type overrides struct {
	mu    sync.Mutex
	rules map[overrideRate]*rule
}

// override is the rule of a request's own limit, made on first use.
func (s *rlsService) override(lim *rlv3.RateLimitDescriptor_RateLimitOverride) (*rule, error) {
	unit := rlspb.RateLimitResponse_RateLimit_Unit(lim.Unit)
	period, ok := unitPeriods[unit]
	if !ok {
		return nil, fmt.Errorf("the limit override's unit %v is not second, minute, hour, day, week, month or year", lim.Unit)
	}
	k := overrideRate{requestsPerUnit: lim.RequestsPerUnit, multiplier: max(lim.UnitMultiplier.GetValue(), 1), unit: unit}
	if period > maxRatePeriod/time.Duration(k.multiplier) {
		return nil, fmt.Errorf("the limit override's period, %d × %v, is longer than 366 days", k.multiplier, lim.Unit)
	}
	o := &s.overrides
	o.mu.Lock()
	defer o.mu.Unlock()
	if r := o.rules[k]; r != nil {
		return r, nil
	}
	if len(o.rules) >= maxOverrideRates {
		return nil, fmt.Errorf("more than %d distinct limit overrides: each is a limiter of its own, so the server refuses more", maxOverrideRates)
	}
	r := &rule{id: fmt.Sprintf("override %d/%d×%v", k.requestsPerUnit, k.multiplier, k.unit), unit: unit,
		requestsPerUnit: k.requestsPerUnit, multiplier: k.multiplier, perValue: true,
		// Stats keys name the request's entries, as envoyproxy/ratelimit's do.
		detailed: true, valuesInStats: true}
	if r.requestsPerUnit > 0 {
		tokens, per, size := r.rate()
		l, err := s.newLimiter("rls override "+rateID(tokens, per, size), tokens, per, size)
		if err != nil {
			return nil, fmt.Errorf("the limit override %d every %d × %v: %w", k.requestsPerUnit, k.multiplier, k.unit, err)
		}
		r.limiter = l
	}
	if o.rules == nil {
		o.rules = map[overrideRate]*rule{}
	}
	o.rules[k] = r
	return r, nil
}

// overrideKey is the bucket key of an override: the domain and every
// entry, so two domains or two lists of values never share a bucket.
func overrideKey(b []byte, domain string, entries []*rlv3.RateLimitDescriptor_Entry) []byte {
	b = binary.AppendUvarint(b, uint64(len(domain)))
	b = append(b, domain...)
	for _, e := range entries {
		b = appendEntry(b, e.Key, e.Value, false)
	}
	return b
}

// closeOverrides stops the override limiters, telling the peers.
func (s *rlsService) closeOverrides() {
	o := &s.overrides
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.rules {
		if r.limiter != nil {
			_ = r.limiter.Close()
		}
	}
	o.rules = nil
}
