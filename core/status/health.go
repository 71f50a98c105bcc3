// Package status shows what a limiter sees: a health check for probes and
// alerts (Ready, Health, Check), a self-contained live status page (Page),
// every node's view side by side (ClusterPage), and the keys it denies
// most as JSON (TopKeys), this node's or the cluster's. They use only the
// limiter's Stats, Peers and TopKeys, and the standard library; the
// cluster-wide ones read the other nodes' pages over HTTP (ReadNodes).
package status

import (
	"fmt"
	"net/http"
	"strings"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// Check reports whether l is whole, and why not: a standalone limiter
// always is; a clustered one when every peer it knows of is in sight.
// reason names the peers out of sight and how long each has been silent.
func Check(l *gopherpace.Limiter) (ok bool, reason string) {
	s := l.Stats()
	if !s.Clustered {
		return true, "standalone"
	}
	if !s.Partitioned {
		return true, fmt.Sprintf("%d of %d known nodes in sight", s.VisibleNodes, s.KnownNodes)
	}
	var away []string
	for _, p := range l.Peers() {
		if p.InSight {
			continue
		}
		if p.Heard {
			away = append(away, fmt.Sprintf("%s (silent for %v)", p.Name, p.LastHeard.Round(1e6)))
		} else {
			away = append(away, p.Name+" (never heard)")
		}
	}
	return false, fmt.Sprintf("%d of %d known nodes in sight; out of sight: %s", s.VisibleNodes, s.KnownNodes, strings.Join(away, ", "))
}

// Ready answers 200 "ready: deciding requests" while every limiter can decide
// requests, and 503 "not ready: <reasons>" once one has been closed (the
// replica is shutting down), or while the cluster it was told to join
// refuses it (Limiter.JoinError: a gossip key or label that does not
// match, which would have it serve the whole limit alone), as text. Mount
// it as the readiness probe.
// Peers out of sight never make a replica unready: a dead peer is a reason
// to report (Health, the status page, metrics), and if every replica
// answered 503 while one of them was gone, a load balancer would take the
// whole service out of rotation at once. Under any partition policy a
// replica that is cut off still answers every request, by its policy.
func Ready(limiters ...*gopherpace.Limiter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		var closed []string
		for i, l := range limiters {
			if l.Stats().Closed {
				closed = append(closed, fmt.Sprintf("limiter %d is closed", i+1))
			} else if err := l.JoinError(); err != nil {
				closed = append(closed, fmt.Sprintf("limiter %d: %v", i+1, err))
			}
		}
		if len(closed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:", strings.Join(closed, "; "))
			return
		}
		fmt.Fprintln(w, "ready: deciding requests")
	})
}

// Health answers 200 "ok: <reason>" while every limiter is whole, and 503
// "degraded: <reasons>" otherwise, as text. It is a diagnostic for alerts
// and for people, never a readiness probe (use Ready): a degraded node
// still limits (see the partition policy in docs/operations.md), by its
// share of the rate, or not at all under fail-closed, and every healthy
// replica reports degraded while a crashed peer is out of sight.
func Health(limiters ...*gopherpace.Limiter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		var bad, good []string
		for _, l := range limiters {
			ok, reason := Check(l)
			if ok {
				good = append(good, reason)
			} else {
				bad = append(bad, reason)
			}
		}
		if len(bad) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "degraded:", strings.Join(bad, "; "))
			return
		}
		fmt.Fprintln(w, "ok:", strings.Join(good, "; "))
	})
}
