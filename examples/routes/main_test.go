package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The example itself, shortened: three replicas over real memberlist, two
// routes, three limiters on one transport each.
func TestRoutesRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, time.Second); err != nil {
		t.Fatal(err)
	}
	// run fails unless each client got its 5 logins a minute across the
	// cluster (or 6, if an attempt beat the gossip), not 5 per replica.
	if !strings.Contains(out.String(), "api-quota") {
		t.Fatalf("no gossip table:\n%s", out.String())
	}
	t.Log("\n" + out.String())
}
