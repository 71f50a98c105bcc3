package gopherpace

import (
	"strconv"
	"testing"
	"time"
)

func BenchmarkAllow(b *testing.B) {
	l, _ := New(WithRefillRate(1_000_000_000), WithBucketSize(1_000_000_000))
	b.ReportAllocs()
	for b.Loop() {
		l.Allow()
	}
}

func BenchmarkAllowAt(b *testing.B) {
	l, _ := New(WithRefillRate(1_000_000_000), WithBucketSize(1_000_000_000))
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		l.AllowAt(now)
	}
}

func BenchmarkAllowParallel(b *testing.B) {
	l, _ := New(WithRefillRate(1_000_000_000), WithBucketSize(1_000_000_000))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Allow()
		}
	})
}

func BenchmarkTakeKeyed(b *testing.B) {
	l, _ := New(WithRefillRate(1), WithBucketSize(1_000_000))
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Take(keys[i&1023], 1)
		i++
	}
}

func BenchmarkHashKey(b *testing.B) {
	b.ReportAllocs()
	var h uint64
	for b.Loop() {
		h += hashKey(0, "203.0.113.195")
	}
	_ = h
}
