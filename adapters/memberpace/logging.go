package memberpace

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
)

// logWriter turns memberlist's "[LEVEL] memberlist: message" lines into
// slog records. Messages that a partition or a restart produce by the
// hundred are demoted to debug: the limiter reports partitions itself.
type logWriter struct{ log *slog.Logger }

var noisy = []string{
	"Stream connection", "Initiating push/pull sync", "Failed fallback ping",
	"Failed to send gossip", "Push/Pull with", "Suspect", "Failed ping",
	"Was able to connect to", "but other probes failed", "Marking", "Failed to send indirect",
}

func (w logWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		w.line(string(line))
	}
	return len(p), nil
}

func (w logWriter) line(s string) {
	level := slog.LevelInfo
	switch {
	case strings.HasPrefix(s, "[DEBUG]"):
		level = slog.LevelDebug
	case strings.HasPrefix(s, "[WARN]"):
		level = slog.LevelWarn
	case strings.HasPrefix(s, "[ERR]"), strings.HasPrefix(s, "[ERROR]"), strings.HasPrefix(s, "Err:"):
		level = slog.LevelError
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
	w.log.Log(context.Background(), level, s)
}
