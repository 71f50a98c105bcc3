package seeds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
)

// Resolver looks up a host's addresses; *net.Resolver satisfies it.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// DNS resolves Host's A and AAAA records, one per peer, and pairs each
// address with Port. A Kubernetes headless Service (clusterIP: None) has
// exactly such records, one per ready pod.
type DNS struct {
	Host string
	Port int
	// Resolver defaults to net.DefaultResolver.
	Resolver Resolver
}

// ListsEveryPeer reports true: a headless Service lists every ready pod
// (Roster).
func (DNS) ListsEveryPeer() bool { return true }

// Seeds resolves the name now; every call asks again.
func (d DNS) Seeds(ctx context.Context) ([]string, error) {
	if d.Host == "" {
		return nil, errors.New("seeds: DNS host is empty")
	}
	if d.Port < 1 || d.Port > 65535 {
		return nil, fmt.Errorf("seeds: DNS port %d is out of range", d.Port)
	}
	r := d.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupHost(ctx, d.Host)
	if err != nil {
		return nil, fmt.Errorf("seeds: resolving %s: %w", d.Host, err)
	}
	if len(addrs) == 0 {
		return nil, ErrNoSeeds
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, net.JoinHostPort(a, strconv.Itoa(d.Port)))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
