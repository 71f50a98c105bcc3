package gopherpace

import (
	"testing"
	"unsafe"
)

func TestShardIsOneCacheLine(t *testing.T) {
	if s := unsafe.Sizeof(shard{}); s != 64 {
		t.Fatalf("shard is %d bytes, want 64", s)
	}
	if s := unsafe.Sizeof(bucket{}); s != 64 {
		t.Fatalf("bucket is %d bytes, want 64", s)
	}
}
