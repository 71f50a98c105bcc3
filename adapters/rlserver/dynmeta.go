package rlserver

import (
	"fmt"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// dynamicMetadata is a response's dynamic metadata, as
// envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA returns it for Envoy
// to log or route on: the request's domain, its descriptors (each entry as
// "key=value", its limit override and hits), its hits, and the metadata of
// the descriptors that passed, merged (a key both give keeps the first;
// two mappings under one key are merged the same way).
func dynamicMetadata(req *rlspb.RateLimitRequest, checks []checked) *structpb.Struct {
	fields := map[string]*structpb.Value{"domain": structpb.NewStringValue(req.Domain)}
	descriptors := make([]*structpb.Value, 0, len(req.Descriptors))
	for _, d := range req.Descriptors {
		descriptors = append(descriptors, structpb.NewStructValue(descriptorStruct(d)))
	}
	fields["descriptors"] = structpb.NewListValue(&structpb.ListValue{Values: descriptors})
	if req.HitsAddend != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(req.HitsAddend))
	}
	passed := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := range checks {
		if c := &checks[i]; c.rule != nil && c.rule.metadata != nil && !c.over {
			merge(passed, c.rule.metadata)
		}
	}
	if len(passed.Fields) > 0 {
		fields["metadata"] = structpb.NewStructValue(passed)
	}
	return &structpb.Struct{Fields: fields}
}

func descriptorStruct(d *rlv3.RateLimitDescriptor) *structpb.Struct {
	entries := make([]*structpb.Value, 0, len(d.Entries))
	for _, e := range d.Entries {
		entries = append(entries, structpb.NewStringValue(e.Key+"="+e.Value))
	}
	fields := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
	if d.Limit != nil {
		fields["limit"] = structpb.NewStringValue(fmt.Sprintf("%d per %v", d.Limit.RequestsPerUnit, d.Limit.Unit))
	}
	if d.HitsAddend != nil {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(d.HitsAddend.Value))
	}
	return &structpb.Struct{Fields: fields}
}

// merge adds src's fields to dst's: a field dst has already stays, unless
// both are mappings, which merge.
func merge(dst, src *structpb.Struct) {
	for k, v := range src.Fields {
		have, ok := dst.Fields[k]
		if !ok {
			dst.Fields[k] = v
			continue
		}
		if hs, ss := have.GetStructValue(), v.GetStructValue(); hs != nil && ss != nil {
			// A copy: the config's own metadata is shared by every request.
			copied := &structpb.Struct{Fields: map[string]*structpb.Value{}}
			merge(copied, hs)
			merge(copied, ss)
			dst.Fields[k] = structpb.NewStructValue(copied)
		}
	}
}
