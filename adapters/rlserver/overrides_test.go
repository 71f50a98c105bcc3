package rlserver

import (
	"fmt"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/pedreviljoen/gopherpace/adapters/rlserver/rlsclient"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func withOverride(rpu uint32, unit rlspb.RateLimitResponse_RateLimit_Unit, kv ...string) *rlv3.RateLimitDescriptor {
	d := descriptor(kv...)
	d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: typev3.RateLimitUnit(unit)}
	return d
}

// A request's own limit replaces the config's for its descriptor, in a
// domain the config has, with a bucket per list of entries; a domain the
// config lacks stays unlimited, as in envoyproxy/ratelimit.
func TestRequestLimitOverride(t *testing.T) {
	f := newRLS(t, edgeConfig, false)
	ask := func(domain string, d *rlv3.RateLimitDescriptor) *rlspb.RateLimitResponse {
		return f.ask(t, &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlv3.RateLimitDescriptor{d}})
	}
	// 2 an hour for a descriptor the config has no rule for.
	for i, want := range []rlspb.RateLimitResponse_Code{rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OVER_LIMIT} {
		resp := ask("edge", withOverride(2, rlspb.RateLimitResponse_RateLimit_HOUR, "route", "/export"))
		if resp.OverallCode != want {
			t.Fatalf("request %d under 2/hour: %v", i+1, resp.OverallCode)
		}
		if cl := resp.Statuses[0].CurrentLimit; cl == nil || cl.RequestsPerUnit != 2 || cl.Unit != rlspb.RateLimitResponse_RateLimit_HOUR {
			t.Fatalf("the status's limit is %v, want the override's", cl)
		}
	}
	// Another list of entries is another bucket; the config's own rule for
	// remote_address (20 a minute) is replaced by the request's 1 a day.
	if got := ask("edge", withOverride(2, rlspb.RateLimitResponse_RateLimit_HOUR, "route", "/import")).OverallCode; got != rlspb.RateLimitResponse_OK {
		t.Fatalf("another route under the same override: %v", got)
	}
	day := withOverride(1, rlspb.RateLimitResponse_RateLimit_DAY, "remote_address", "10.9.9.9")
	if ask("edge", day).OverallCode != rlspb.RateLimitResponse_OK || ask("edge", day).OverallCode != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatal("1 a day: want the first and not the second")
	}
	if r := f.remaining(t, "edge.remote_address", "remote_address", "10.9.9.9"); r != 20 {
		t.Fatalf("the config's bucket for the address was spent: %d left", r)
	}
	// A domain the config lacks: OK, as without the override.
	if got := ask("nowhere", withOverride(0, rlspb.RateLimitResponse_RateLimit_SECOND, "a", "b")).OverallCode; got != rlspb.RateLimitResponse_OK {
		t.Fatalf("override in an unknown domain: %v", got)
	}
	// unit_multiplier: 1 every 30 seconds; a period past 366 days is refused.
	every30s := withOverride(1, rlspb.RateLimitResponse_RateLimit_SECOND, "job", "sync")
	every30s.Limit.UnitMultiplier = wrapperspb.UInt32(30)
	if ask("edge", every30s).OverallCode != rlspb.RateLimitResponse_OK || ask("edge", every30s).OverallCode != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatal("1 every 30 s: want the first and not the second")
	}
	long := withOverride(1, rlspb.RateLimitResponse_RateLimit_DAY, "job", "sync")
	long.Limit.UnitMultiplier = wrapperspb.UInt32(400)
	if _, err := f.client.ShouldRateLimit(t.Context(), &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{long}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an override of 1 every 400 days: %v, want InvalidArgument", err)
	}
	// 0 a unit allows nothing.
	if got := ask("edge", withOverride(0, rlspb.RateLimitResponse_RateLimit_SECOND, "a", "b")).OverallCode; got != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("override of 0: %v", got)
	}
}

// Every distinct override rate is a limiter: past maxOverrideRates a new
// one is refused, and those made go on working.
func TestOverrideRatesAreBounded(t *testing.T) {
	f := newRLS(t, edgeConfig, false)
	for i := range maxOverrideRates + 1 {
		_, err := f.client.ShouldRateLimit(t.Context(), &rlspb.RateLimitRequest{Domain: "edge",
			Descriptors: []*rlv3.RateLimitDescriptor{withOverride(uint32(100+i), rlspb.RateLimitResponse_RateLimit_MINUTE, "k", fmt.Sprint(i))}})
		switch {
		case i < maxOverrideRates && err != nil:
			t.Fatalf("override rate %d: %v", i, err)
		case i == maxOverrideRates && (status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "distinct limit overrides")):
			t.Fatalf("override rate %d: %v, want InvalidArgument", i, err)
		}
	}
	resp := f.ask(t, &rlspb.RateLimitRequest{Domain: "edge",
		Descriptors: []*rlv3.RateLimitDescriptor{withOverride(100, rlspb.RateLimitResponse_RateLimit_MINUTE, "k", "0")}})
	if resp.OverallCode != rlspb.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != 98 {
		t.Fatalf("a known override rate after the cap: %v", resp)
	}
}

// The Go client of the RateLimitService against this server: allowed,
// then refused with the next token's reset, then refused from its cache.
func TestRLSClientAgainstTheServer(t *testing.T) {
	f := newRLS(t, edgeConfig, false)
	c := rlsclient.New(f.conn, "edge")
	d := rlsclient.Descriptor("remote_address", "10.9.9.1") // 20 a minute: a token every 3 s
	for i := range 20 {
		if r := c.Check(t.Context(), rlsclient.FailClosed, d); !r.Allowed || r.Err != nil {
			t.Fatalf("call %d: %+v", i+1, r)
		}
	}
	r := c.Check(t.Context(), rlsclient.FailOpen, d)
	if r.Allowed || r.Cached || r.RetryAfter <= 0 || r.RetryAfter > 3*time.Second {
		t.Fatalf("the 21st: %+v, want refused until the next token, at most 3s", r)
	}
	if r := c.Check(t.Context(), rlsclient.FailOpen, d); r.Allowed || !r.Cached {
		t.Fatalf("the 22nd: %+v, want refused from the cache", r)
	}
}
