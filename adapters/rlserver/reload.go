package rlserver

import (
	"context"
	"crypto/sha256"
	"os"
	"runtime/debug"
	"time"
)

// reload loads path and swaps it in. A file that does not load is
// refused, logged and counted, and the limits before it stay.
func (s *rlsService) reload(path string) error {
	cfg, err := loadRLSConfig(path, s.mergeDomains)
	if err == nil {
		err = s.swap(cfg)
	}
	s.metrics.configLoaded(err == nil)
	if err == nil {
		s.counts.configLoaded.Add(1)
	} else {
		s.counts.configRefused.Add(1)
	}
	if err != nil {
		s.log.Error("the new config is refused; the limits before it stay", "config", path, "err", err)
		return err
	}
	s.log.Info("config loaded", "config", path, "rules", len(cfg.rules), "domains", len(cfg.domains), "limiters", len(s.rules.Load().limiters))
	// What reading the files and the set before held goes back to the
	// system now, not at the runtime's leisure.
	debug.FreeOSMemory()
	return nil
}

// watch reloads path when hup delivers (SIGHUP) and when its contents
// change from seen (their fingerprint when last loaded), read every poll,
// until ctx is done. Reading the contents rather
// than watching for events also sees a Kubernetes ConfigMap update, which
// swaps a symlink to a new directory.
func (s *rlsService) watch(ctx context.Context, path string, poll time.Duration, hup <-chan os.Signal, seen [sha256.Size]byte) {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		case <-tick.C:
			if fingerprint(path) == seen {
				continue
			}
		}
		seen = fingerprint(path)
		_ = s.reload(path)
	}
}

// fingerprint is a hash of the config's files, names and contents; a file
// that cannot be read hashes as its error.
func fingerprint(path string) [sha256.Size]byte {
	h := sha256.New()
	files, err := configFiles(path)
	if err != nil {
		h.Write([]byte(err.Error()))
	}
	for _, f := range files {
		h.Write([]byte(f))
		h.Write([]byte{0})
		if data, err := os.ReadFile(f); err != nil {
			h.Write([]byte(err.Error()))
		} else {
			h.Write(data)
		}
		h.Write([]byte{0})
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
