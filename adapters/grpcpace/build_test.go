package grpcpace

import (
	"strings"
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/conformance"
)

// A client-only option given to a server is refused, not ignored, and an
// option's error keeps its chain through the constructors.
func TestBuildErrors(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRefillRate(1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := BuildServer(l, WithWait()); err == nil || !strings.Contains(err.Error(), "grpcpace: WithWait applies to client interceptors") {
		t.Fatalf("BuildServer(l, WithWait()) = %v", err)
	}
	if _, err := BuildClient(l, WithWait()); err != nil {
		t.Fatalf("BuildClient(l, WithWait()) = %v", err)
	}
	conformance.KeepsErrorChains(t, "grpcpace", WithPolicyName, func(opts ...Option) error { _, err := BuildServer(l, opts...); return err })
}
