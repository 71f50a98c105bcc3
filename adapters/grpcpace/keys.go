package grpcpace

import (
	"context"

	"github.com/pedreviljoen/gopherpace/core/adapter"
	"google.golang.org/grpc/metadata"
)

// KeyFunc picks the bucket for a call; "" is the limiter's global bucket.
// An error fails the call, and spends nothing.
type KeyFunc func(ctx context.Context, fullMethod string) (string, error)

// ErrMissingKey is returned by a KeyFunc when the call lacks the value it
// keys on; the call fails with codes.InvalidArgument, which retry policies
// do not retry.
var ErrMissingKey = adapter.ErrMissingKey

// MetadataKey keys calls by the first value of an incoming (server) or
// outgoing (client) metadata key, such as an API key.
func MetadataKey(name string) KeyFunc {
	missing := adapter.MissingKey("the " + name + " metadata")
	return func(ctx context.Context, _ string) (string, error) {
		if v := metadata.ValueFromIncomingContext(ctx, name); len(v) > 0 && v[0] != "" {
			return v[0], nil
		}
		if md, ok := metadata.FromOutgoingContext(ctx); ok {
			if v := md.Get(name); len(v) > 0 && v[0] != "" {
				return v[0], nil
			}
		}
		return "", missing
	}
}

// MethodKey keys calls by full method name: one bucket per method.
func MethodKey(_ context.Context, fullMethod string) (string, error) { return fullMethod, nil }

// GlobalKey puts every call in the limiter's global bucket.
func GlobalKey(context.Context, string) (string, error) { return "", nil }
