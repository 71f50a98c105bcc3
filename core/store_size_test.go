package gopherpace

import (
	"testing"
	"unsafe"
)

func TestLayout(t *testing.T) {
	if s := unsafe.Sizeof(shard{}); s != 64 {
		t.Fatalf("shard is %d bytes, want one cache line", s)
	}
	if s := unsafe.Sizeof(bucket{}); s != 64 {
		t.Fatalf("bucket is %d bytes, want one cache line", s)
	}
	if s := unsafe.Sizeof(entry{}); s != 8 {
		t.Fatalf("standalone entry is %d bytes, want 8", s)
	}
	// entry.pending relies on the entry being the first field.
	if off := unsafe.Offsetof(clusterEntry{}.entry); off != 0 {
		t.Fatalf("clusterEntry.entry at offset %d, want 0", off)
	}
}
