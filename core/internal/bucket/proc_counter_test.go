package bucket

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// Every add lands exactly once, from goroutines spread over more
// processors than there are per-processor slots (the rest share stripes),
// and a sum read while they add never goes backwards.
func TestProcCounterCountsEveryAdd(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	c := NewProcCounter()
	runtime.GOMAXPROCS(12) // Ps beyond the slots share one
	const goroutines, adds = 96, 2000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	readerDone := make(chan error, 1)
	go func() {
		last := int64(0)
		for {
			select {
			case <-stop:
				readerDone <- nil
				return
			default:
			}
			n := c.Load()
			if n < last {
				readerDone <- fmt.Errorf("the sum went back from %d to %d", last, n)
				return
			}
			last = n
			runtime.Gosched()
		}
	}()
	for g := range goroutines {
		wg.Go(func() {
			for i := range adds {
				c.Add(int64(1 + (g+i)%3))
				if i%64 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	var want int64
	for g := range goroutines {
		for i := range adds {
			want += int64(1 + (g+i)%3)
		}
	}
	if got := c.Load(); got != want {
		t.Fatalf("counted %d, want %d", got, want)
	}
}
