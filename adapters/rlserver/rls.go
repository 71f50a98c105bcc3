package rlserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The most a ShouldRateLimit request may hold; more is InvalidArgument,
// with nothing spent (docs/service.md#bad-requests).
const (
	maxDescriptors = 64
	maxEntries     = 16
	maxEntryBytes  = 1024 // each entry's key and value; the domain too
)

// The headers a response carries when -response-headers is on, named as
// envoyproxy/ratelimit names them by default.
const (
	headerLimit     = "RateLimit-Limit"
	headerRemaining = "RateLimit-Remaining"
	headerReset     = "RateLimit-Reset"
)

// rlsService answers Envoy's RateLimitService v3 from a config file's
// limits. The rules of one rate (requests_per_unit and unit) share one
// limiter, named by the rate on every replica, in which each rule's
// buckets are keyed by its id and the values of the descriptors it
// matches: a config of 100,000 tenants' limits in a few tiers is a few
// limiters, not 100,000 (each a store, counters and, clustered, a gossip
// engine ticking 20 times a second). A reload swaps in a new set of
// rules; a rule whose rate stays keeps its buckets, a rule whose rate
// changed is decided by the limiter of its new rate, from full buckets.
type rlsService struct {
	rlspb.UnimplementedRateLimitServiceServer

	rules     atomic.Pointer[ruleSet]
	transport gopherpace.Transport // nil: standalone
	maxKeys   int64
	headers   bool
	byRule    bool // count each rule's outcomes (-rule-metrics)
	quotaAll  bool // every rule in quota mode (-quota-mode)
	shadowAll bool // every answer OK, over-limit counted (-shadow-mode)
	// mergeDomains lets a reload merge a domain's files (-merge-domains).
	mergeDomains bool
	headerNames  [3]string        // -response-headers' names: limit, remaining, reset
	stats        *descriptorStats // with byRule: envoyproxy/ratelimit's stats
	// dynamicMetadata returns the request and its descriptors' metadata in
	// each response (-response-dynamic-metadata).
	dynamicMetadata bool
	counts          serviceCounts // for statsd (statsdsink.go)
	overrides       overrides
	log             *slog.Logger
	metrics         *serviceMetrics
	shared          []gopherpace.Option // every rule's limiter takes them

	reloadMu sync.Mutex // one reload at a time
}

// ruleSet is one loaded config and a limiter for each rate its rules have
// (each rule's own is rule.limiter).
type ruleSet struct {
	cfg      *rlsConfig
	limiters map[string]*gopherpace.Limiter // by rateID
}

// rateID names the limiter of a rate, the same on every replica: "rls
// 10/1m0s/10" is 10 tokens a minute in buckets of 10.
func rateID(tokens int64, per time.Duration, size int64) string {
	return "rls " + strconv.FormatInt(tokens, 10) + "/" + per.String() + "/" + strconv.FormatInt(size, 10)
}

func newRLSService(cfg *rlsConfig, transport gopherpace.Transport, maxKeys int64, headers bool, log *slog.Logger, metrics *serviceMetrics, shared ...gopherpace.Option) (*rlsService, error) {
	s := &rlsService{transport: transport, maxKeys: maxKeys, headers: headers, log: log, metrics: metrics, shared: shared,
		headerNames: [3]string{headerLimit, headerRemaining, headerReset}, stats: newDescriptorStats(DefaultNearLimitRatio)}
	if cfg == nil {
		cfg = newRLSConfig()
	}
	if err := s.swap(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// swap makes cfg the service's limits: each rate its rules have keeps its
// limiter from the set before, or gets a new one; a rate no rule has any
// more has its limiter closed. If any limiter cannot be made, nothing
// changes.
func (s *rlsService) swap(cfg *rlsConfig) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	old := s.rules.Load()
	next := &ruleSet{cfg: cfg, limiters: map[string]*gopherpace.Limiter{}}
	var made []*gopherpace.Limiter
	fail := func(err error) error {
		for _, l := range made {
			_ = l.Close()
		}
		return err
	}
	ids := make([]string, 0, len(cfg.rules))
	for id := range cfg.rules {
		ids = append(ids, id)
	}
	sort.Strings(ids) // a bad rate is reported at the same rule every time
	for _, id := range ids {
		r := cfg.rules[id]
		if r.unlimited || r.requestsPerUnit == 0 {
			continue
		}
		tokens, per, size := r.rate()
		rid := rateID(tokens, per, size)
		l := next.limiters[rid]
		if l == nil && old != nil {
			l = old.limiters[rid]
		}
		if l == nil {
			var err error
			if l, err = s.newLimiter(rid, tokens, per, size); err != nil {
				return fail(fmt.Errorf("%s: %s: %w", r.at, id, err))
			}
			made = append(made, l)
		}
		next.limiters[rid] = l
		r.limiter = l
	}
	s.rules.Store(next)
	if s.metrics != nil {
		if err := s.metrics.setLimiters(next.limiters); err != nil {
			s.log.Error("the rules' metrics could not be exported", "err", err)
		}
	}
	if old != nil {
		for id, l := range old.limiters {
			if next.limiters[id] == nil {
				// A request that loaded the old set may still decide on it;
				// a closed limiter keeps deciding, as if standalone.
				_ = l.Close()
			}
		}
	}
	return nil
}

// newLimiter makes the limiter named id of a rate, on the service's
// transport.
func (s *rlsService) newLimiter(id string, tokens int64, per time.Duration, size int64) (*gopherpace.Limiter, error) {
	opts := []gopherpace.Option{
		gopherpace.WithRate(tokens, per), gopherpace.WithBucketSize(size),
		gopherpace.WithLimiterID(id), gopherpace.WithMaxKeys(s.maxKeys), gopherpace.WithLogger(s.log),
	}
	if s.transport != nil {
		opts = append(opts, gopherpace.WithTransport(s.transport))
	}
	return gopherpace.New(append(opts, s.shared...)...)
}

// close stops every rule's limiter, telling the peers.
func (s *rlsService) close() {
	s.closeOverrides()
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if set := s.rules.Swap(nil); set != nil {
		for _, l := range set.limiters {
			_ = l.Close()
		}
	}
}

// limiterFor is the limiter of a rule id in the current set (nil if none).
func (s *rlsService) limiterFor(id string) *gopherpace.Limiter {
	if set := s.rules.Load(); set != nil {
		if r := set.cfg.rules[id]; r != nil {
			return r.limiter
		}
	}
	return nil
}

// bucketKey is the key of the bucket a rule decides a descriptor on, in
// its rate's limiter: the rule's id, and for a rule with a bucket per
// value the descriptor's entries (match's key) after a zero byte, so that
// no two rules, nor two values, share a bucket.
func bucketKey(r *rule, entries []byte) string {
	if !r.perValue {
		return r.id
	}
	b := make([]byte, 0, len(r.id)+1+len(entries))
	return string(append(append(append(b, r.id...), 0), entries...))
}

// checked is one descriptor of a request on its way to an answer.
type checked struct {
	rule   *rule
	l      *gopherpace.Limiter // nil: no bucket to spend from
	key    string
	hits   int64 // 0: check only
	refund bool  // is_negative_hits: give hits back
	spent  bool
	d      gopherpace.Decision
	over   bool
}

// ShouldRateLimit checks every descriptor of the request and spends from
// all of them or from none: a request any limit denies spends nothing.
func (s *rlsService) ShouldRateLimit(ctx context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	if err := validate(req); err != nil {
		s.metrics.count(outcomeBadRequest)
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	set := s.rules.Load()
	if set == nil {
		return nil, status.Error(codes.Unavailable, "shutting down")
	}
	known := set.cfg.domains[req.Domain] != nil
	if !known {
		// envoyproxy/ratelimit answers OK for a domain it has no limits
		// for; so does this server, but says so in its log and metrics,
		// since it is most likely a typo in Envoy's config or ours.
		s.metrics.unknownDomain(s.log, req.Domain)
		if s.byRule {
			s.stats.unknownDomain(req.Domain)
		}
	}
	checks := make([]checked, len(req.Descriptors))
	var replaced map[string]bool // names some matched rule replaces; rarely any
	var keyBuf []byte
	for i, d := range req.Descriptors {
		c := &checks[i]
		if d.Limit != nil && known {
			r, err := s.override(d.Limit)
			if err != nil {
				s.metrics.count(outcomeBadRequest)
				return nil, status.Error(codes.InvalidArgument, fmt.Sprintf("descriptor %d: %v", i, err))
			}
			c.rule, keyBuf = r, overrideKey(keyBuf[:0], req.Domain, d.Entries)
		} else {
			c.rule, keyBuf = set.cfg.match(req.Domain, d.Entries, keyBuf[:0])
		}
		if c.rule == nil {
			continue
		}
		for _, name := range c.rule.replaces {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			replaced[name] = true
		}
		c.hits = int64(max(1, req.HitsAddend))
		if d.HitsAddend != nil {
			c.hits = int64(min(d.HitsAddend.Value, math.MaxInt64))
		}
		c.refund = d.IsNegativeHits
		c.l = c.rule.limiter
		c.key = bucketKey(c.rule, keyBuf)
	}
	for i := range checks {
		if r := checks[i].rule; r != nil && r.name != "" && replaced[r.name] {
			checks[i] = checked{}
		}
	}
	denied, err := s.decide(checks)
	if err != nil {
		s.metrics.count(outcomeBadRequest)
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	resp := &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK, Statuses: make([]*rlspb.RateLimitResponse_DescriptorStatus, len(checks))}
	if denied {
		resp.OverallCode = rlspb.RateLimitResponse_OVER_LIMIT
	}
	var closest *checked
	for i := range checks {
		c := &checks[i]
		resp.Statuses[i] = descriptorStatus(c)
		if s.byRule && c.rule != nil {
			if !c.rule.unlimited {
				c.rule.count(c)
			}
			s.stats.hit(set.cfg, req.Domain, req.Descriptors[i].Entries, c)
		}
		if c.rule != nil && !c.rule.unlimited && (closest == nil || c.over && !closest.over || c.over == closest.over && c.d.Remaining < closest.d.Remaining) {
			closest = c
		}
	}
	if s.headers && closest != nil {
		resp.ResponseHeadersToAdd = rateLimitHeaders(s.headerNames, closest)
	}
	if s.dynamicMetadata {
		resp.DynamicMetadata = dynamicMetadata(req, checks)
	}
	if denied && s.shadowAll {
		// -shadow-mode: every answer OK; what would have been over the
		// limit is counted as shadow_denied (the descriptors keep their
		// own statuses, as envoyproxy/ratelimit's SHADOW_MODE does).
		resp.OverallCode = rlspb.RateLimitResponse_OK
		s.metrics.count(outcomeShadowDenied)
		s.counts.globalShadow.Add(1)
		return resp, nil
	}
	switch {
	case !known:
		s.metrics.count(outcomeUnknownDomain)
	case denied:
		s.metrics.count(outcomeOverLimit)
	default:
		s.metrics.count(outcomeOK)
	}
	return resp, nil
}

// decide spends from every limited descriptor in order; at the first
// denial it gives back what the ones before took and reads the rest, so a
// denied request spends nothing. A shadow rule's denial lets the request
// through, as envoyproxy/ratelimit's shadow_mode does. A negative hit of
// more than its key can have spent is refused (gopherpace's
// ErrRefundExceedsSpent): the request is an error, and what the
// descriptors before it took is given back.
//
// A check of zero hits spends nothing. It is over, for a rate rule, while
// its bucket is empty; for a quota rule, while its bucket is in debt (the
// peer's counter past its limit), so the request that spends a budget's
// last token passes and its usage, reported after it, overdraws. Quota rules (quota_mode, or -quota-mode for all) are
// budgets, as envoyproxy/ratelimit's are: every hit spends, whatever the
// answer, into debt where the bucket lacks it (Envoy's token quotas
// report a response's usage after it), and they deny the request only
// when every quota rule it matches is over.
func (s *rlsService) decide(checks []checked) (denied bool, err error) {
	quotas, quotasOver := 0, 0
	for i := range checks {
		c := &checks[i]
		switch {
		case c.rule == nil || c.rule.unlimited:
			continue
		case c.l == nil: // requests_per_unit 0: nothing is ever allowed
			c.over = !c.rule.shadow
			c.d = gopherpace.Decision{}
			if s.quota(c.rule) {
				quotas++
				if c.over {
					quotasOver++
				}
				continue
			}
		case s.quota(c.rule):
			if err := c.spendQuota(); err != nil {
				s.giveBack(checks[:i])
				return false, fmt.Errorf("descriptor %d: %w", i, err)
			}
			quotas++
			if c.over {
				quotasOver++
			}
			continue
		case denied:
			c.d = c.l.Peek(c.key)
			c.over = !c.d.Allowed && !c.rule.shadow && c.hits > 0
			continue
		case c.hits == 0:
			c.d = c.l.Peek(c.key)
			c.over = !c.d.Allowed && !c.rule.shadow
		case c.refund:
			if err := c.l.Refund(c.key, c.hits); err != nil {
				s.giveBack(checks[:i])
				return false, fmt.Errorf("descriptor %d: %w", i, err)
			}
			c.d = c.l.Peek(c.key)
			continue
		default:
			d, err := c.l.Take(c.key, c.hits)
			if err != nil { // more hits than the bucket holds: never allowed
				d = c.l.Peek(c.key)
				d.Allowed = false
			}
			c.d, c.spent = d, d.Allowed
			c.over = !d.Allowed && !c.rule.shadow
		}
		if c.over && !denied {
			denied = true
			s.giveBack(checks[:i])
		}
	}
	if quotas > 0 && quotasOver == quotas && !denied {
		denied = true
		s.giveBack(checks)
	}
	return denied, nil
}

func (s *rlsService) quota(r *rule) bool { return r.quota || s.quotaAll }

// spendQuota spends a quota rule's hits whatever the answer (a check of
// zero reads the bucket), and marks the descriptor over while its bucket
// is in debt after them, or for a check, in debt. Debt stops at
// one bucket beyond empty (gopherpace's Charge).
func (c *checked) spendQuota() error {
	switch {
	case c.refund:
		if err := c.l.Refund(c.key, c.hits); err != nil {
			return err
		}
		c.d = c.l.Peek(c.key)
	case c.hits == 0:
		// Over only while overdrawn, as the peer's counter is only once
		// past its limit: a check on a budget spent to the last token
		// passes, and the usage reported after it goes into debt.
		c.d = c.l.Peek(c.key)
		owed, err := c.l.Charge(c.key, 0)
		c.over = owed > 0 || err != nil && !c.d.Allowed
	default:
		owed, err := c.l.Charge(c.key, c.hits)
		if errors.Is(err, gopherpace.ErrChargeDropped) {
			return err
		}
		c.d = c.l.Peek(c.key)
		c.over = owed > 0
	}
	c.over = c.over && !c.rule.shadow
	return nil
}

// giveBack returns what checks spent: tokens just taken, never refused.
func (s *rlsService) giveBack(checks []checked) {
	for i := range checks {
		if p := &checks[i]; p.spent {
			_ = p.l.Refund(p.key, p.hits)
			p.spent = false
		}
	}
}

// count counts c's outcome under its rule.
func (r *rule) count(c *checked) {
	switch {
	case c.over:
		r.decisions[ruleOverLimit].Add(1)
	case r.shadow && (c.l == nil || !c.d.Allowed && c.hits > 0 && !c.refund):
		r.decisions[ruleShadowDenied].Add(1)
	default:
		r.decisions[ruleOK].Add(1)
	}
}

func descriptorStatus(c *checked) *rlspb.RateLimitResponse_DescriptorStatus {
	st := &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}
	switch {
	case c.rule == nil:
		return st
	case c.rule.unlimited:
		st.LimitRemaining = math.MaxUint32
		return st
	}
	if c.over {
		st.Code = rlspb.RateLimitResponse_OVER_LIMIT
	}
	st.CurrentLimit = &rlspb.RateLimitResponse_RateLimit{Name: c.rule.name, RequestsPerUnit: c.rule.requestsPerUnit, Unit: c.rule.unit}
	st.LimitRemaining = uint32(min(max(c.d.Remaining, 0), math.MaxUint32))
	// Over the limit, the reset a caller waits for is its next token, not
	// a full bucket: what a fixed window's reset means to the peer's
	// callers, the time a refused request could pass.
	reset := c.d.ResetAfter
	if c.over {
		reset = c.d.RetryAfter
	}
	st.DurationUntilReset = durationpb.New(reset)
	return st
}

// rateLimitHeaders describe the limit closest to denying: its
// requests_per_unit, the tokens left, and the whole seconds until the
// request could pass (denied) or the bucket is full (allowed).
func rateLimitHeaders(names [3]string, c *checked) []*corev3.HeaderValue {
	wait := c.d.ResetAfter
	if c.over {
		wait = c.d.RetryAfter
	}
	return []*corev3.HeaderValue{
		{Key: names[0], Value: strconv.FormatUint(uint64(c.rule.requestsPerUnit), 10)},
		{Key: names[1], Value: strconv.FormatInt(max(c.d.Remaining, 0), 10)},
		{Key: names[2], Value: strconv.FormatInt(ceilDiv(wait, time.Second), 10)},
	}
}

// validate refuses a request this server cannot answer as asked.
func validate(req *rlspb.RateLimitRequest) error {
	switch {
	case req.Domain == "":
		return errors.New("the domain must not be empty")
	case len(req.Domain) > maxEntryBytes:
		return fmt.Errorf("the domain is longer than %d bytes", maxEntryBytes)
	case len(req.Descriptors) == 0:
		return errors.New("the descriptor list must not be empty")
	case len(req.Descriptors) > maxDescriptors:
		return fmt.Errorf("%d descriptors; at most %d are taken", len(req.Descriptors), maxDescriptors)
	}
	for i, d := range req.Descriptors {
		if err := validateDescriptor(d); err != nil {
			return fmt.Errorf("descriptor %d: %w", i, err)
		}
	}
	return nil
}

func validateDescriptor(d *rlv3.RateLimitDescriptor) error {
	switch {
	case d == nil || len(d.Entries) == 0:
		return errors.New("no entries")
	case len(d.Entries) > maxEntries:
		return fmt.Errorf("%d entries; at most %d are taken", len(d.Entries), maxEntries)
	}
	for _, e := range d.Entries {
		switch {
		case e == nil || e.Key == "":
			return errors.New("an entry has an empty key")
		case len(e.Key) > maxEntryBytes || len(e.Value) > maxEntryBytes:
			return fmt.Errorf("entry %q is longer than %d bytes", truncate(e.Key, 32), maxEntryBytes)
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
