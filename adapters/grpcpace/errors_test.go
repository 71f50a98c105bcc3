package grpcpace

import (
	"errors"
	"strings"
	"testing"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// The sentinel an option reports is found through the constructor, under
// this package's prefix.
func TestBuildErrorsKeepTheirChains(t *testing.T) {
	l, err := gopherpace.New(gopherpace.WithRefillRate(1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = BuildServer(l, WithPolicyName(""))
	if !errors.Is(err, headers.ErrPolicyName) || !strings.HasPrefix(err.Error(), "grpcpace: ") {
		t.Fatalf("errors.Is(%v, headers.ErrPolicyName) is false, or the prefix is missing", err)
	}
}

// A client-only option given to a server is refused, not ignored.
func TestServerRefusesWithWait(t *testing.T) {
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
}
