package gopherpace

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"unsafe"
)

func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func TestDbgLimiterSize(t *testing.T) {
	const n = 2000
	before := heapNow()
	ls := make([]*Limiter, n)
	for i := range ls {
		ls[i], _ = New(WithRefillRate(10))
	}
	t.Logf("standalone: %d B/limiter; store %d, leases %v", (heapNow()-before)/n, unsafe.Sizeof(plainStore{}), ls[0].leases != nil)
	tr := &nopTransport{}
	before = heapNow()
	cs := make([]*Limiter, n)
	for i := range cs {
		cs[i], _ = New(WithRefillRate(10), WithTransport(tr), WithLimiterID(fmt.Sprint(i)))
	}
	t.Logf("clustered: %d B/limiter; cluster store %d, engine %d", (heapNow()-before)/n, unsafe.Sizeof(clusterStore{}), unsafe.Sizeof(engine{}))
	for _, l := range cs {
		l.Close()
	}
	runtime.KeepAlive(ls)
}

func TestDbgEngineFields(t *testing.T) {
	var e engine
	rt := reflect.TypeOf(e)
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		t.Logf("%-12s %6d", f.Name, f.Type.Size())
	}
	for _, v := range []any{Limiter{}, decisionCounts{}, sender{}, receiver{}, peerView{}, fairShares{}, keyShares{}, countedBucket{}} {
		t.Logf("%T %d", v, reflect.TypeOf(v).Size())
	}
	for _, typ := range []any{sender{}, fairShares{}, peerView{}, receiver{}} {
		rt := reflect.TypeOf(typ)
		for i := 0; i < rt.NumField(); i++ {
			if f := rt.Field(i); f.Type.Size() > 64 {
				t.Logf("  %T.%s %d", typ, f.Name, f.Type.Size())
			}
		}
	}
}
