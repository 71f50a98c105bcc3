package rlserver

import (
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// /metrics carries Go's runtime and the process's own series beside the
// service's, so the usual Go dashboards, and make bench-rls's allocations
// per decision (go_memstats_mallocs_total), read them.
func TestMetricsCarryTheRuntimeAndTheProcess(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, err := newServiceMetrics(l, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"go_memstats_mallocs_total", "go_goroutines", "go_gc_duration_seconds", "process_cpu_seconds_total", "process_open_fds"} {
		n, err := testutil.GatherAndCount(m.reg, name)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Errorf("no %s in /metrics", name)
		}
	}
}
