package gopherpace

import (
	"testing"
	"unsafe"
)

func TestLayout(t *testing.T) {
	for name, tc := range map[string]struct{ got, want uintptr }{
		"standalone shard": {unsafe.Sizeof(shard[plainEntry, plainEntry, *plainEntry]{}), 64},
		"clustered shard":  {unsafe.Sizeof(shard[clusterSlot, clusterEntry, *clusterSlot]{}), 64},
		"standalone slot":  {unsafe.Sizeof(keySlot[plainEntry]{}), 16},
		"clustered slot":   {unsafe.Sizeof(keySlot[clusterSlot]{}), 16},
		"bucket":           {unsafe.Sizeof(bucket{}), 64},
		"standalone entry": {unsafe.Sizeof(plainEntry{}), 8},
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
