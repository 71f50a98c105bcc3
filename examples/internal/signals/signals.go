// Package signals ends the examples' serving mode on SIGINT or SIGTERM, so
// that their deferred Close calls run: a clustered limiter says goodbye to
// its peers, and a rolling deploy does not look like a crash.
package signals

import (
	"context"
	"os/signal"
	"syscall"
)

// Wait blocks until the process receives SIGINT or SIGTERM.
func Wait() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
}
