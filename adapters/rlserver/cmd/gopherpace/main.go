// Command gopherpace is gopherpace as a service: a limiter that any
// program asks over HTTP before doing work, its replicas sharing each limit
// over memberlist.
//
//	gopherpace serve -rate 10 -burst 10
//	curl 'localhost:8100/allow?key=tenant-a'
//	gopherpace client -id inst-1 -rps 20 -fail closed
//
// gopherpace serve -h lists every flag; docs/service.md has the API.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/pedreviljoen/gopherpace/adapters/rlserver"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

const usage = `gopherpace is a rate limiter as a service, with no store.

Usage:
  gopherpace serve [flags]   serve the HTTP API and Envoy's RateLimitService (gopherpace serve -h: the flags)
  gopherpace client [flags]  play one replica of a service that asks the limiter before each unit of work,
                             and print what it was allowed (gopherpace client -h: the flags)
`

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "client" {
		return client(args[1:], stdout, stderr)
	}
	if args[0] != "serve" {
		fmt.Fprintf(stderr, "gopherpace: unknown command %q\n%s", args[0], usage)
		return 2
	}
	c, err := rlserver.ParseFlags(args[1:], getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "gopherpace serve:", err)
		return 2
	}
	level, _ := rlserver.ParseLogLevel(c.LogLevel) // ParseFlags checked it
	var h slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	if c.LogFormat == "json" {
		h = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})
	}
	log := slog.New(h)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if err := rlserver.Run(ctx, c, log, nil, hup); err != nil {
		fmt.Fprintln(stderr, "gopherpace serve:", err)
		return 1
	}
	return 0
}
