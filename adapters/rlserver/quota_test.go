package rlserver

import (
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A budget of LLM tokens as Envoy's token quotas spend it: the request
// checks with zero hits, and the response's usage is reported after it
// (apply_on_stream_done) with the tokens as hits.
const tokenQuotaConfig = `
domain: ai
descriptors:
  - key: model
    value: large
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: model
    value: small
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5000}
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 3}
`

func check(f *rlsFixture, t *testing.T, hits uint64, kv ...string) *rlspb.RateLimitResponse {
	t.Helper()
	d := descriptor(kv...)
	d.HitsAddend = wrapperspb.UInt64(hits)
	return f.ask(t, &rlspb.RateLimitRequest{Domain: "ai", Descriptors: []*rlv3.RateLimitDescriptor{d}})
}

// The 0-hit check is OVER_LIMIT while the budget is in debt; a
// report spends whatever the bucket holds, into debt, so usage measured
// after the response is never lost.
func TestTokenQuotaChecksThenCharges(t *testing.T) {
	f := newRLS(t, tokenQuotaConfig, false)
	large := []string{"model", "large"}
	for i, step := range []struct {
		hits uint64
		want rlspb.RateLimitResponse_Code
	}{
		{0, rlspb.RateLimitResponse_OK},           // 1,000 left
		{700, rlspb.RateLimitResponse_OK},         // report: 300 left
		{0, rlspb.RateLimitResponse_OK},           // check
		{800, rlspb.RateLimitResponse_OVER_LIMIT}, // report: spent, 500 in debt (Envoy ignores a report's answer)
		{0, rlspb.RateLimitResponse_OVER_LIMIT},   // check: in debt
		{50, rlspb.RateLimitResponse_OVER_LIMIT},  // a report in debt still spends
	} {
		resp := check(f, t, step.hits, large...)
		if resp.OverallCode != step.want {
			t.Fatalf("step %d (%d hits): %v, want %v", i, step.hits, resp.OverallCode, step.want)
		}
	}
	st := check(f, t, 0, large...).Statuses[0]
	if st.Code != rlspb.RateLimitResponse_OVER_LIMIT || st.LimitRemaining != 0 {
		t.Fatalf("status of a budget in debt: %v", st)
	}
	l := f.svc.limiterFor("ai.model_large")
	r, key := f.svc.rules.Load().cfg.match("ai", entries(large...), nil)
	// Every report spent: 700 + 800 + 50 of 1,000 is 550 in debt, 33 s at
	// 1,000 a minute (less what refilled while the test ran).
	if owed, err := l.Charge(bucketKey(r, key), 0); err != nil || owed > 33*time.Second || owed < 30*time.Second {
		t.Fatalf("debt after the reports: %v (%v), want about 33s", owed, err)
	}
	// A report of more than the bucket: debt stops at one bucket.
	check(f, t, 1_000_000, large...)
	owed, err := l.Charge(bucketKey(r, key), 0)
	if err != nil || owed > time.Minute || owed < 59*time.Second {
		t.Fatalf("a report of 10^6 tokens left %v of debt (%v), want at most one window, 1m", owed, err)
	}
}

// Outside quota mode, a 0-hit check is OVER_LIMIT once the bucket is
// empty, and hits stay all or nothing.
func TestZeroHitCheckOfARateRule(t *testing.T) {
	f := newRLS(t, tokenQuotaConfig, false)
	tenant := []string{"tenant", "acme"}
	if got := check(f, t, 0, tenant...).OverallCode; got != rlspb.RateLimitResponse_OK {
		t.Fatalf("check of a full bucket: %v", got)
	}
	if got := check(f, t, 3, tenant...).OverallCode; got != rlspb.RateLimitResponse_OK {
		t.Fatalf("3 hits of 3: %v", got)
	}
	if got := check(f, t, 0, tenant...).OverallCode; got != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("check of an empty bucket: %v", got)
	}
	if got := check(f, t, 5, tenant...); got.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT || got.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("hits on an empty rate rule: %v", got)
	}
}

// A request matching several quota rules is denied only when all of them
// are over, as envoyproxy/ratelimit's quota_mode defines; each rule's own
// status still says where it stands. A rate rule's denial denies as
// always.
func TestQuotaModeDeniesWhenEveryQuotaIsOver(t *testing.T) {
	f := newRLS(t, tokenQuotaConfig, false)
	both := func(hitsLarge, hitsSmall uint64) *rlspb.RateLimitResponse {
		a, b := descriptor("model", "large"), descriptor("model", "small")
		a.HitsAddend, b.HitsAddend = wrapperspb.UInt64(hitsLarge), wrapperspb.UInt64(hitsSmall)
		return f.ask(t, &rlspb.RateLimitRequest{Domain: "ai", Descriptors: []*rlv3.RateLimitDescriptor{a, b}})
	}
	both(1500, 0) // large: 500 in debt
	resp := both(0, 0)
	if resp.OverallCode != rlspb.RateLimitResponse_OK || resp.Statuses[0].Code != rlspb.RateLimitResponse_OVER_LIMIT ||
		resp.Statuses[1].Code != rlspb.RateLimitResponse_OK {
		t.Fatalf("one quota over, one not: %v", resp)
	}
	both(0, 6000) // small: 1,000 in debt
	if resp := both(0, 0); resp.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("every quota over: %v", resp.OverallCode)
	}
	// A rate rule beside a quota with room: the rate rule still denies.
	f2 := newRLS(t, tokenQuotaConfig, false)
	q, r := descriptor("model", "small"), descriptor("tenant", "acme")
	r.HitsAddend = wrapperspb.UInt64(4) // more than the tenant's 3
	resp = f2.ask(t, &rlspb.RateLimitRequest{Domain: "ai", HitsAddend: 1, Descriptors: []*rlv3.RateLimitDescriptor{q, r}})
	if resp.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("a rate rule's denial beside a quota with room: %v", resp.OverallCode)
	}
}

// -quota-mode makes every rule a quota rule, as envoyproxy/ratelimit's
// QUOTA_MODE does.
func TestGlobalQuotaMode(t *testing.T) {
	c, err := ParseFlags([]string{"-quota-mode"}, func(string) string { return "" }, nil)
	if err != nil || !c.QuotaMode {
		t.Fatalf("-quota-mode: %+v %v", c.QuotaMode, err)
	}
	if c, err := ParseFlags(nil, func(k string) string {
		if k == "GOPHERPACE_QUOTA_MODE" {
			return "true"
		}
		return ""
	}, nil); err != nil || !c.QuotaMode {
		t.Fatalf("GOPHERPACE_QUOTA_MODE=true: %+v %v", c.QuotaMode, err)
	}
	f := newRLS(t, tokenQuotaConfig, false)
	f.svc.quotaAll = true
	tenant := []string{"tenant", "acme"}
	// The tenant's rate rule is now a budget: 5 hits of 3 spend, into debt.
	if got := check(f, t, 5, tenant...).OverallCode; got != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("5 hits on a budget of 3, the only quota rule matched: %v", got)
	}
	if got := check(f, t, 0, tenant...).OverallCode; got != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("check of a budget in debt: %v", got)
	}
}

// A year of fewer than 13 requests (a token more than 30 days apart) is
// served: 6 a year is a token every 60.8 days in a bucket of 6.
func TestAFewRequestsAYear(t *testing.T) {
	f := newRLS(t, "domain: yearly\ndescriptors:\n  - key: audit\n    rate_limit: {unit: year, requests_per_unit: 6}\n  - key: once\n    rate_limit: {unit: year, requests_per_unit: 1}\n", false)
	ask := func(kv ...string) rlspb.RateLimitResponse_Code {
		return f.ask(t, &rlspb.RateLimitRequest{Domain: "yearly", Descriptors: []*rlv3.RateLimitDescriptor{descriptor(kv...)}}).OverallCode
	}
	for i := range 6 {
		if got := ask("audit", "acme"); got != rlspb.RateLimitResponse_OK {
			t.Fatalf("request %d of 6 a year: %v", i+1, got)
		}
	}
	if got := ask("audit", "acme"); got != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("the 7th of 6 a year: %v", got)
	}
	if ask("once", "x") != rlspb.RateLimitResponse_OK || ask("once", "x") != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatal("1 a year: want the first and not the second")
	}
}
