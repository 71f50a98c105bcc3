package rlserver

import (
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const metadataConfig = `
domain: md
descriptors:
  - key: service
    value: a
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata:
      route: {name: a, tier: gold}
  - key: service
    value: b
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata:
      route: {name: b, region: eu}
      owner: team-b
`

// With -response-dynamic-metadata each answer carries the request and the
// merged metadata of the descriptors that passed, as
// envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA does.
func TestResponseDynamicMetadata(t *testing.T) {
	f := newRLS(t, metadataConfig, false)
	f.svc.dynamicMetadata = true
	ask := func() *rlspb.RateLimitResponse {
		a, b := descriptor("service", "a"), descriptor("service", "b")
		b.HitsAddend = wrapperspb.UInt64(2)
		return f.ask(t, &rlspb.RateLimitRequest{Domain: "md", HitsAddend: 1, Descriptors: []*rlv3.RateLimitDescriptor{a, b}})
	}
	md := ask().DynamicMetadata.AsMap()
	if md["domain"] != "md" || md["hitsAddend"] != 1.0 {
		t.Fatalf("metadata %v", md)
	}
	ds := md["descriptors"].([]any)
	if len(ds) != 2 || ds[0].(map[string]any)["entries"].([]any)[0] != "service=a" || ds[1].(map[string]any)["hitsAddend"] != 2.0 {
		t.Fatalf("descriptors %v", ds)
	}
	meta := md["metadata"].(map[string]any)
	route := meta["route"].(map[string]any)
	if route["name"] != "a" || route["tier"] != "gold" || route["region"] != "eu" || meta["owner"] != "team-b" {
		t.Fatalf("merged metadata of both passed descriptors: %v", meta)
	}
	// a is now over its 1 a minute: only b's metadata.
	meta = ask().DynamicMetadata.AsMap()["metadata"].(map[string]any)
	if meta["route"].(map[string]any)["name"] != "b" {
		t.Fatalf("metadata once a is over: %v", meta)
	}
	// The config's metadata is left as it was.
	if got := f.svc.rules.Load().cfg.rules["md.service_a"].metadata.AsMap()["route"].(map[string]any); len(got) != 2 {
		t.Fatalf("a merge changed the config's metadata: %v", got)
	}
}
