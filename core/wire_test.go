package gopherpace

import (
	"testing"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
	"github.com/pedreviljoen/gopherpace/core/internal/wire"
	"github.com/pedreviljoen/gopherpace/core/transportkit"
)

// The wire's bound on a count is the most a bucket can hold: a frame can
// carry any count a real node sends, and nothing past a bucket.
func TestWireBoundIsTheBucketBound(t *testing.T) {
	if wire.MaxTokens != uint64(bucket.MaxTolerance) {
		t.Fatalf("wire.MaxTokens %d, the core's maxTolerance %d", wire.MaxTokens, bucket.MaxTolerance)
	}
}

// A transport of the smallest frame size the contract allows fits a header
// and one keyed entry of any size.
func TestMinFrameSizeFitsAnEntry(t *testing.T) {
	if wire.HeaderMax+wire.EntryMax > transportkit.MinFrameSize {
		t.Fatalf("a header and an entry take up to %d bytes; transportkit.MinFrameSize is %d", wire.HeaderMax+wire.EntryMax, transportkit.MinFrameSize)
	}
}
