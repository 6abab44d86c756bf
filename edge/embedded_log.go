package edge

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
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
//
// A route to a gateway that is down fails once a second for as long as it
// is down (nats-server retries explicit routes forever and reports every
// failed reconnect): those errors are limited per peer and cause, to the
// first one and then one every RouteErrorEvery carrying suppressed=N, and
// the lines left out go to Debug. One down gateway thus costs a line a
// minute, and never hides another peer's errors.
type serverLogger struct {
	log      *slog.Logger
	lim      *logLimiter
	routeLim *logLimiter

	mu        sync.Mutex
	fatalText string
}

func newServerLogger(l *slog.Logger) *serverLogger {
	if l != nil {
		l = l.With("component", "nats-server")
	}
	return &serverLogger{log: l, lim: newLogLimiter(LogBurst, LogEvery), routeLim: newLogLimiter(1, RouteErrorEvery)}
}

// RouteErrorEvery is how often a failing route to one peer is logged after
// its first failure.
const RouteErrorEvery = time.Minute

// routeConnErrFmt is nats-server's format for a failed route connection
// (server/route.go); its arguments are the attempt number and the error,
// which names the peer's address.
const routeConnErrFmt = "Error trying to connect to route (attempt %v): %v"

// limitKey returns the limiter and key of a line of format with v.
func (s *serverLogger) limitKey(format string, v []any) (*logLimiter, string) {
	if format == routeConnErrFmt && len(v) == 2 {
		return s.routeLim, fmt.Sprint(v[1]) // the peer and the cause, not the attempt
	}
	return s.lim, format
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
	lim, key := s.limitKey(format, v)
	ok, suppressed := lim.allow(key)
	switch {
	case !ok && lim == s.routeLim:
		if s.enabled(slog.LevelDebug) {
			s.log.Log(context.Background(), slog.LevelDebug, fmt.Sprintf(format, v...))
		}
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
