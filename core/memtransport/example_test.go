package memtransport_test

import (
	"fmt"
	"strings"

	"github.com/pedreviljoen/gopherpace/core/memtransport"
)

// Nodes named after their region carry it as their zone, and the network
// counts the bytes that cross between regions.
func ExampleWithZones() {
	region := func(name string) string { return strings.SplitN(name, "-", 2)[0] }
	crossing := 0
	net := memtransport.New(memtransport.WithZones(region), memtransport.WithObserver(func(from, to string, size int) {
		if region(from) != region(to) {
			crossing += size
		}
	}))
	a, _ := net.Join("east-1")
	net.Join("east-2")
	net.Join("west-1")
	a.Broadcast([]byte("hello"))
	a.SendTo("east-2", []byte("hi"))
	fmt.Println(a.Zone("west-1"), "bytes crossing:", crossing)
	// Output: west bytes crossing: 5
}
