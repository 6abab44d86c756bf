package edge

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Log rate limits. A line that others can provoke at will (a permissions
// violation on the bus, a refused message, a failing push) must not let them
// fill a gateway's journal: each kind of warning or error is written at most
// LogBurst times in a row, then at most once every LogEvery, and the next
// line written of that kind carries suppressed=N, the number of its lines
// left out since the last one written.
const (
	LogBurst = 10
	LogEvery = 10 * time.Second
	// logKinds bounds the kinds tracked; beyond it every new kind shares
	// one budget, so made-up messages cannot grow the table.
	logKinds = 512
)

// logLimiter counts lines per kind. It is safe for concurrent use.
type logLimiter struct {
	burst int
	every time.Duration
	start time.Time
	clock func() time.Duration // tests: the time since start; nil reads the monotonic clock

	mu    sync.Mutex
	kinds map[string]*logKind
}

type logKind struct {
	tokens     float64
	last       time.Duration
	suppressed int
}

func newLogLimiter(burst int, every time.Duration) *logLimiter {
	return &logLimiter{burst: burst, every: every, start: time.Now(), kinds: map[string]*logKind{}}
}

// allow reports whether a line of kind key may be written now and, if so,
// how many lines of that kind were left out before it.
func (l *logLimiter) allow(key string) (ok bool, suppressed int) {
	var now time.Duration
	if l.clock != nil {
		now = l.clock()
	} else {
		now = time.Since(l.start)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k, found := l.kinds[key]
	if !found {
		if len(l.kinds) >= logKinds {
			key = "\x00other"
			k = l.kinds[key]
		}
		if k == nil {
			k = &logKind{tokens: float64(l.burst), last: now}
			l.kinds[key] = k
		}
	}
	k.tokens = min(float64(l.burst), k.tokens+float64(now-k.last)/float64(l.every))
	k.last = now
	if k.tokens < 1 {
		k.suppressed++
		return false, 0
	}
	k.tokens--
	suppressed, k.suppressed = k.suppressed, 0
	return true, suppressed
}

// LimitedHandler is a slog.Handler that rate-limits the warnings and errors
// of the handler it wraps, per message (see LogBurst); lines below Warn pass
// untouched.
type LimitedHandler struct {
	h   slog.Handler
	lim *logLimiter
}

// NewLimitedHandler wraps h with the default limits.
func NewLimitedHandler(h slog.Handler) *LimitedHandler {
	return &LimitedHandler{h: h, lim: newLogLimiter(LogBurst, LogEvery)}
}

// Enabled implements slog.Handler.
func (l *LimitedHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

// Handle implements slog.Handler.
func (l *LimitedHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return l.h.Handle(ctx, r)
	}
	ok, n := l.lim.allow(r.Level.String() + "\x00" + r.Message)
	if !ok {
		return nil
	}
	if n > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", n))
	}
	return l.h.Handle(ctx, r)
}

// WithAttrs implements slog.Handler; the result shares the limits.
func (l *LimitedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &LimitedHandler{h: l.h.WithAttrs(attrs), lim: l.lim}
}

// WithGroup implements slog.Handler; the result shares the limits.
func (l *LimitedHandler) WithGroup(name string) slog.Handler {
	return &LimitedHandler{h: l.h.WithGroup(name), lim: l.lim}
}

// NewLogger is the binary's logger: text or JSON (format "json") on w, at
// level "debug", "info" (the default), "warn" or "error", with warnings and
// errors that others can provoke at will rate-limited (LimitedHandler), so
// that they cannot fill the journal.
func NewLogger(w io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	switch level {
	case "debug":
		lv = slog.LevelDebug
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(NewLimitedHandler(h))
}
