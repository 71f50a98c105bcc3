package rlserver

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"
)

// With -statsd, the counts envoyproxy/ratelimit pushes to statsd go there
// under its names, so that the dashboards and alerts built on them read
// the same numbers: every -stats-flush (10 s), what each counter gained
// since the last flush:
//
//	ratelimit.service.rate_limit.<key>.total_hits, .over_limit,
//	  .near_limit, .within_limit, .shadow_mode
//	ratelimit.service.rate_limit.<domain>.domain_not_found
//	ratelimit.service.config_load_success, .config_load_error
//	ratelimit.service.global_shadow_mode
//
// With -dogstatsd the lines carry -statsd-tags as DogStatsD tags.

// statsdSink pushes the service's counts to a statsd server.
type statsdSink struct {
	client   *statsd.Client
	tags     []string
	interval time.Duration
	last     map[string]uint64 // what each name had at the last flush
	log      *slog.Logger
}

// serviceCounts are the service-wide counts statsd names.
type serviceCounts struct {
	configLoaded, configRefused, globalShadow atomic.Uint64
}

func newStatsdSink(addr string, dogTags []string, interval time.Duration, log *slog.Logger) (*statsdSink, error) {
	c, err := statsd.New(addr, statsd.WithoutTelemetry(), statsd.WithoutOriginDetection(), statsd.WithoutClientSideAggregation())
	if err != nil {
		return nil, err
	}
	return &statsdSink{client: c, tags: dogTags, interval: interval, last: map[string]uint64{}, log: log}, nil
}

// run flushes every interval until ctx ends, and once more then.
func (s *statsdSink) run(ctx context.Context, svc *rlsService) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.flush(svc)
			_ = s.client.Close()
			return
		case <-t.C:
			s.flush(svc)
		}
	}
}

// flush sends what each counter gained since the last flush.
func (s *statsdSink) flush(svc *rlsService) {
	const prefix = "ratelimit.service."
	send := func(name string, total uint64) {
		prev := s.last[name]
		if total < prev {
			prev = 0 // a rule a reload replaced counts from zero
		}
		if total == prev {
			s.last[name] = total
			return
		}
		if err := s.client.Count(prefix+statsdName(name), int64(total-prev), s.tags, 1); err != nil {
			s.log.Debug("statsd: a count was not sent", "err", err)
			return
		}
		s.last[name] = total
	}
	send("config_load_success", svc.counts.configLoaded.Load())
	send("config_load_error", svc.counts.configRefused.Load())
	send("global_shadow_mode", svc.counts.globalShadow.Load())
	svc.stats.each(svc.rules.Load(), func(key string, c *statCounts) {
		for i, stat := range statNames {
			send("rate_limit."+key+"."+stat, c[i].Load())
		}
	}, func(domain string, n uint64) {
		send("rate_limit."+domain+".domain_not_found", n)
	})
	_ = s.client.Flush()
}

// statsdName keeps a name clear of the bytes that end a statsd name or
// value.
func statsdName(s string) string { return statsdUnsafe.Replace(s) }

var statsdUnsafe = strings.NewReplacer(":", "_", "|", "_", "@", "_", "\n", "_", "#", "_")
