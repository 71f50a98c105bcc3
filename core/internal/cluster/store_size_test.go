package cluster

import (
	"testing"
	"unsafe"

	"github.com/pedreviljoen/gopherpace/core/internal/bucket"
)

func TestLayout(t *testing.T) {
	for name, tc := range map[string]struct{ got, want uintptr }{
		"standalone shard": {unsafe.Sizeof(bucket.Shard[bucket.PlainEntry, bucket.PlainEntry, *bucket.PlainEntry]{}), 64},
		"clustered shard":  {unsafe.Sizeof(bucket.Shard[clusterSlot, clusterEntry, *clusterSlot]{}), 64},
		"standalone slot":  {unsafe.Sizeof(bucket.KeySlot[bucket.PlainEntry]{}), 16},
		"clustered slot":   {unsafe.Sizeof(bucket.KeySlot[clusterSlot]{}), 16},
		"bucket":           {unsafe.Sizeof(bucket.Plain{}), 64},
		"standalone entry": {unsafe.Sizeof(bucket.PlainEntry{}), 8},
		"clustered entry":  {unsafe.Sizeof(clusterEntry{}), 32},
		"counted bucket":   {unsafe.Sizeof(countedWord{}), 64},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("%d bytes, want %d", tc.got, tc.want)
			}
		})
	}
}
