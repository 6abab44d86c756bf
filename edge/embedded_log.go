package edge

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// LevelTrace is the slog level of nats-server trace lines (every protocol
// operation). The server traces only when the handler is enabled at this
// level, which no default handler is.
const LevelTrace = slog.LevelDebug - 4

// serverLogger adapts the nats-server Logger interface (Noticef, Warnf,
// Fatalf, Errorf, Debugf, Tracef) to slog. It also remembers the first fatal
// message, because the server reports start-up failures only by logging them.
// A nil slog.Logger discards everything but that record. Notices, warnings
// and errors are rate-limited per format (LogBurst): a client that provokes
// the same error (a permissions violation) thousands of times gets ten
// lines, then one every LogEvery with the count of those left out.
type serverLogger struct {
	log *slog.Logger
	lim *logLimiter

	mu        sync.Mutex
	fatalText string
}

func newServerLogger(l *slog.Logger) *serverLogger {
	if l != nil {
		l = l.With("component", "nats-server")
	}
	return &serverLogger{log: l, lim: newLogLimiter(LogBurst, LogEvery)}
}

func (s *serverLogger) enabled(level slog.Level) bool {
	return s.log != nil && s.log.Enabled(context.Background(), level)
}

// debugEnabled and traceEnabled tell the server whether to produce debug and
// trace lines at all, so that disabled levels cost nothing.
func (s *serverLogger) debugEnabled() bool { return s.enabled(slog.LevelDebug) }
func (s *serverLogger) traceEnabled() bool { return s.enabled(LevelTrace) }

func (s *serverLogger) emit(level slog.Level, format string, v []any) {
	if !s.enabled(level) {
		return
	}
	if level < slog.LevelInfo {
		s.log.Log(context.Background(), level, fmt.Sprintf(format, v...))
		return
	}
	ok, suppressed := s.lim.allow(format)
	switch {
	case !ok:
	case suppressed > 0:
		s.log.Log(context.Background(), level, fmt.Sprintf(format, v...), "suppressed", suppressed)
	default:
		s.log.Log(context.Background(), level, fmt.Sprintf(format, v...))
	}
}

// fatal returns the first fatal message logged, or "".
func (s *serverLogger) fatal() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fatalText
}

// Noticef logs at Info.
func (s *serverLogger) Noticef(format string, v ...any) { s.emit(slog.LevelInfo, format, v) }

// Warnf logs at Warn.
func (s *serverLogger) Warnf(format string, v ...any) { s.emit(slog.LevelWarn, format, v) }

// Errorf logs at Error.
func (s *serverLogger) Errorf(format string, v ...any) { s.emit(slog.LevelError, format, v) }

// Fatalf logs at Error and records the message. Unlike the server's own
// logger it does not exit the process: the agent decides what a failed
// embedded server means, and StartEmbedded returns the message as an error.
func (s *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	s.mu.Lock()
	if s.fatalText == "" {
		s.fatalText = msg
	}
	s.mu.Unlock()
	if s.enabled(slog.LevelError) {
		s.log.Error(msg, "fatal", true)
	}
}

// Debugf logs at Debug.
func (s *serverLogger) Debugf(format string, v ...any) { s.emit(slog.LevelDebug, format, v) }

// Tracef logs at LevelTrace.
func (s *serverLogger) Tracef(format string, v ...any) { s.emit(LevelTrace, format, v) }
