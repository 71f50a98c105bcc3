package grpcpace

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// denied builds ResourceExhausted with RetryInfo and a QuotaFailure that
// names the policy and its rate, but never the caller's key.
func denied(d gopherpace.Decision, policy string) error {
	st := status.New(codes.ResourceExhausted, "rate limit exceeded")
	withDetails, err := st.WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(max(d.RetryAfter, time.Millisecond))},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject:     "policy:" + policy,
			Description: "rate limit of " + describeRate(d) + " exceeded",
		}}},
	)
	if err != nil {
		return st.Err()
	}
	return withDetails.Err()
}

// describeRate says a decision's rate and burst in words: "1 per second,
// bursts of 3", "100 per hour, bursts of 100".
func describeRate(d gopherpace.Decision) string {
	if d.Window <= 0 || d.BucketSize <= 0 {
		return "nothing"
	}
	// The first unit with a whole number of tokens, or else the first
	// with at least one.
	perSecond := float64(d.BucketSize) / d.Window.Seconds()
	units := []struct {
		name    string
		seconds float64
	}{{"second", 1}, {"minute", 60}, {"hour", 3600}, {"day", 86400}}
	amount, unit := perSecond*86400, "day"
	found := false
	for _, u := range units {
		a := perSecond * u.seconds
		if a < 1 {
			continue
		}
		if !found {
			amount, unit, found = a, u.name, true
		}
		if math.Abs(a-math.Round(a)) < 1e-9 {
			amount, unit = a, u.name
			break
		}
	}
	return strconv.FormatFloat(amount, 'g', 4, 64) + " per " + unit + ", bursts of " + strconv.FormatInt(d.BucketSize, 10)
}

// sendHeaders sends the request's fields as header metadata, names in
// lower case.
func (x *interceptor) sendHeaders(ctx context.Context, req *adapter.Request) {
	var f adapter.Fields
	x.gate.RenderRequest(&f, req)
	md := make(metadata.MD, f.Len())
	for i := range f.Len() {
		md[strings.ToLower(f.Name(i))] = []string{strings.Clone(f.Value(i))}
	}
	_ = grpc.SetHeader(ctx, md)
}
