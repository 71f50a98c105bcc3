package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The heap objects a Go server has allocated (runtime.MemStats.Mallocs),
// read from what each server exposes: gopherpace serve's /metrics
// (go_memstats_mallocs_total), envoyproxy/ratelimit's debug port /stats
// (expvar's memstats, a line "memstats: {...}"), and the do-nothing
// server's /debug/vars (expvar). Redis is not Go: its allocations are not
// counted.
type mallocReader func() (uint64, error)

var debugClient = http.Client{Timeout: 10 * time.Second}

func scanAllocs(url string, read func(*bufio.Scanner) (uint64, bool, error)) (uint64, error) {
	resp, err := debugClient.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	n, ok, err := read(sc)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", url, err)
	}
	if !ok {
		return 0, fmt.Errorf("%s: no allocation count", url)
	}
	return n, nil
}

// mallocsFromMetrics reads go_memstats_mallocs_total from a Prometheus
// text exposition.
func mallocsFromMetrics(url string) mallocReader {
	return func() (uint64, error) {
		return scanAllocs(url, func(sc *bufio.Scanner) (uint64, bool, error) {
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_mallocs_total "); ok {
					f, err := strconv.ParseFloat(v, 64)
					return uint64(f), err == nil, err
				}
			}
			return 0, false, sc.Err()
		})
	}
}

type memstats struct{ Mallocs uint64 }

// mallocsFromStatsLines reads the memstats line of envoyproxy/
// ratelimit's /stats.
func mallocsFromStatsLines(url string) mallocReader {
	return func() (uint64, error) {
		return scanAllocs(url, func(sc *bufio.Scanner) (uint64, bool, error) {
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "memstats: "); ok {
					var m memstats
					err := json.Unmarshal([]byte(v), &m)
					return m.Mallocs, err == nil, err
				}
			}
			return 0, false, sc.Err()
		})
	}
}

// mallocsFromExpvar reads expvar's JSON document.
func mallocsFromExpvar(url string) mallocReader {
	return func() (uint64, error) {
		resp, err := debugClient.Get(url)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var vars struct {
			Memstats memstats `json:"memstats"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&vars); err != nil {
			return 0, fmt.Errorf("%s: %w", url, err)
		}
		return vars.Memstats.Mallocs, nil
	}
}
