package memberpace

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// logWriter turns memberlist's "[LEVEL] memberlist: message" lines into
// slog records. Messages that a partition or a restart produce by the
// hundred are demoted to debug: the limiter reports partitions itself.
// Every record is rate-limited per kind of message: anyone who can send a
// datagram to the gossip port can make memberlist log a line, so at most
// one record per kind goes out every logEvery, carrying the count of those
// suppressed since.
type logWriter struct {
	log        *slog.Logger
	errors     atomic.Uint64 // WARN and ERROR lines seen
	suppressed atomic.Uint64 // lines not logged
	// closing is set when the transport shuts down: memberlist's probes
	// still under way then fail on its closed sockets, which is no error.
	closing atomic.Bool
	mu      sync.Mutex
	kinds   map[string]*logKind
}

type logKind struct {
	last       time.Time
	suppressed int
}

const (
	logEvery = 10 * time.Second
	// maxLogKinds bounds the kinds remembered; past it, new kinds share one.
	maxLogKinds = 256
)

var noisy = []string{
	"Stream connection", "Initiating push/pull sync", "Failed fallback ping",
	"Failed to send gossip", "Push/Pull with", "Suspect", "Failed ping",
	"Was able to connect to", "but other probes failed", "Marking", "Failed to send indirect",
}

func newLogWriter(log *slog.Logger) *logWriter {
	return &logWriter{log: log, kinds: map[string]*logKind{}}
}

func (w *logWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		w.line(string(line), time.Now())
	}
	return len(p), nil
}

func (w *logWriter) line(s string, now time.Time) {
	level := slog.LevelInfo
	switch {
	case strings.HasPrefix(s, "[DEBUG]"):
		level = slog.LevelDebug
	case strings.HasPrefix(s, "[WARN]"):
		level = slog.LevelWarn
	case strings.HasPrefix(s, "[ERR]"), strings.HasPrefix(s, "[ERROR]"), strings.HasPrefix(s, "Err:"):
		level = slog.LevelError
	}
	if level >= slog.LevelWarn {
		w.errors.Add(1)
	}
	if i := strings.IndexByte(s, ']'); strings.HasPrefix(s, "[") && i > 0 {
		s = strings.TrimSpace(s[i+1:])
	}
	s = strings.TrimPrefix(s, "memberlist: ")
	for _, n := range noisy {
		if strings.Contains(s, n) {
			level = slog.LevelDebug
			break
		}
	}
	if w.closing.Load() && strings.Contains(s, "use of closed network connection") {
		level = slog.LevelDebug
	}
	ctx := context.Background()
	if !w.log.Enabled(ctx, level) {
		return
	}
	suppressed, ok := w.admit(kindOf(s), now)
	if !ok {
		w.suppressed.Add(1)
		return
	}
	if suppressed > 0 {
		w.log.Log(ctx, level, s, "suppressed", suppressed)
		return
	}
	w.log.Log(ctx, level, s)
}

// admit reports whether a record of kind may go out at now, and how many
// of its kind were suppressed since the last one did.
func (w *logWriter) admit(kind string, now time.Time) (suppressed int, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := w.kinds[kind]
	if k == nil {
		if len(w.kinds) >= maxLogKinds {
			kind = "other"
			if k = w.kinds[kind]; k != nil {
				return w.admitKind(k, now)
			}
		}
		k = &logKind{}
		w.kinds[kind] = k
		k.last = now
		return 0, true
	}
	return w.admitKind(k, now)
}

func (w *logWriter) admitKind(k *logKind, now time.Time) (int, bool) {
	if now.Sub(k.last) < logEvery {
		k.suppressed++
		return 0, false
	}
	n := k.suppressed
	k.last, k.suppressed = now, 0
	return n, true
}

// kindOf is a message with what varies from line to line cut off: the text
// before its first detail (a colon, a parenthesis, a quote, an address),
// without digits.
func kindOf(s string) string {
	if i := strings.IndexAny(s, ":(\"'="); i >= 0 {
		s = s[:i]
	}
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, strings.TrimSpace(s))
}
