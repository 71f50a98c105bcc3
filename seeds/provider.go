package seeds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
)

// Provider lists the addresses ("host:port") of peers to join.
// Implementations must be safe for concurrent use.
type Provider interface {
	Seeds(ctx context.Context) ([]string, error)
}

// A Roster is a Provider whose answer lists every live peer, not only some
// to join through: a peer whose address it no longer lists has gone (a
// deleted pod drops out of its headless Service's DNS). memberpace takes a
// member that memberlist declared dead and the roster no longer lists as
// gone for good, rather than cut off.
type Roster interface {
	Provider
	// ListsEveryPeer reports whether the answers list every live peer.
	ListsEveryPeer() bool
}

// ErrNoSeeds is returned when a provider found no address at all.
var ErrNoSeeds = errors.New("seeds: no peer addresses found")

// Static is a fixed list of "host:port" addresses.
type Static []string

// Seeds returns the list, after checking that every entry is a host:port
// with a valid port.
func (s Static) Seeds(context.Context) ([]string, error) {
	if len(s) == 0 {
		return nil, ErrNoSeeds
	}
	out := make([]string, 0, len(s))
	for _, addr := range s {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" {
			return nil, fmt.Errorf("seeds: static address %q is not host:port", addr)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("seeds: static address %q has an invalid port", addr)
		}
		out = append(out, addr)
	}
	return out, nil
}

// Fallback asks each provider in turn and returns the addresses of the
// first one that finds any.
type Fallback []Provider

// Seeds returns the first non-empty answer, or all the errors joined.
func (f Fallback) Seeds(ctx context.Context) ([]string, error) {
	var errs []error
	for _, p := range f {
		if p == nil {
			continue
		}
		addrs, err := p.Seeds(ctx)
		if err == nil && len(addrs) > 0 {
			return addrs, nil
		}
		if err == nil {
			err = ErrNoSeeds
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, ErrNoSeeds
	}
	return nil, errors.Join(errs...)
}
