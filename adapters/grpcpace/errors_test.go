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
