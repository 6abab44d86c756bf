package site

import (
	"context"
	"embed"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/edge-agent/edge-agent/agent"
)

//go:embed index.html
var files embed.FS

// Defaults of Config.
const (
	DefaultInterval   = time.Second
	DefaultMaxStreams = 8
	// writeTimeout drops a stream whose reader stopped reading (a laptop
	// that went to sleep): its writes would otherwise block for ever.
	writeTimeout = 10 * time.Second
)

// Config is what a Site shows and how often.
type Config struct {
	// Status returns the serving agent's status (agent.Agent.Status).
	Status func() agent.StatusReport
	// Watch returns the serving agent's leader changes
	// (agent.Agent.Watch): each one is pushed at once.
	Watch func() (<-chan agent.LeaderChange, func())
	// Ask asks the other members for their own status, waiting at most
	// timeout for the answers of the members named in wait, those the
	// serving agent believes alive (bus.Bus.GroupStatus); nil shows the
	// serving agent's view only.
	Ask func(ctx context.Context, timeout time.Duration, wait []string) ([]Answer, error)
	// Interval is the longest time between two snapshots of a stream, and
	// between two rounds of Ask (DefaultInterval when 0).
	Interval time.Duration
	// MaxStreams bounds the streams (GET /events) served at once
	// (DefaultMaxStreams when 0): a site laptop or two, not the internet.
	MaxStreams int
	// Log receives the site's few log lines (nil: none).
	Log *slog.Logger
}

// Answer is a member's own status report and when it came, on the serving
// gateway's clock.
type Answer struct {
	Report agent.StatusReport
	At     time.Time
}

// Site serves the site page. Create it with New.
type Site struct {
	c    Config
	h    hub
	json struct { // the last answers GET /site.json asked for
		mu      sync.Mutex
		at      time.Time
		answers []Answer
	}
}

// New returns a Site for c.
func New(c Config) *Site {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Site{c: c}
	s.h.site = s
	return s
}

// Handler serves the page (GET /), its stream (GET /events) and one
// snapshot (GET /site.json); every other request goes to next (the agent's
// /status, /healthz, /readyz and /metrics).
func (s *Site) Handler(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /site.json", s.snapshotJSON)
	// The page is read-only: other methods on its paths are refused
	// rather than passed to next.
	for _, p := range []string{"/{$}", "/events", "/site.json"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the site page is read-only: use the edge-agent command line", http.StatusMethodNotAllowed)
		})
	}
	mux.Handle("/", next)
	return mux
}

func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	// The page loads nothing from elsewhere and may not be framed.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; frame-ancestors 'none'; form-action 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

func (s *Site) page(w http.ResponseWriter, _ *http.Request) {
	b, err := files.ReadFile("index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b)
}

// snapshotJSON returns a snapshot. It asks the other members at most once
// per Interval, however often it is called (a script polling it must not
// turn the agent into a source of status requests).
func (s *Site) snapshotJSON(w http.ResponseWriter, r *http.Request) {
	var reports []Answer
	if s.c.Ask != nil {
		s.json.mu.Lock()
		if s.json.at.IsZero() || time.Since(s.json.at) >= s.c.Interval {
			s.json.answers, _ = s.c.Ask(r.Context(), s.askTimeout(), waitFor(s.c.Status()))
			s.json.at = time.Now()
		}
		reports = s.json.answers
		s.json.mu.Unlock()
	}
	securityHeaders(w)
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(build(s.c.Status(), reports, time.Now()))
}

// waitFor names the members a round waits for: the others that local
// believes alive. A member it believes down is asked too, but a round does
// not wait for it: the leader's lease figure would age meanwhile.
func waitFor(local agent.StatusReport) []string {
	wait := []string{}
	for _, m := range local.Members {
		if m.ID != local.ID && m.Alive {
			wait = append(wait, m.ID)
		}
	}
	return wait
}

// askTimeout is how long a round waits for answers: long enough for a
// loaded gateway, short enough that a dead member does not hold the
// round past the next one.
func (s *Site) askTimeout() time.Duration { return s.c.Interval / 2 }

// events streams snapshots as server-sent events (event "snapshot", the
// JSON of a Snapshot) until the client goes away.
func (s *Site) events(w http.ResponseWriter, r *http.Request) {
	c, ok := s.h.join()
	if !ok {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many site pages open on this gateway", http.StatusServiceUnavailable)
		return
	}
	defer s.h.leave(c)
	rc := http.NewResponseController(w)
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// A lost stream is retried by the browser after a second.
	if !write([]byte("retry: 1000\n\n")) {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case b := <-c.ch:
			msg := make([]byte, 0, len(b)+32)
			msg = append(msg, "event: snapshot\ndata: "...)
			msg = append(msg, b...)
			msg = append(msg, "\n\n"...)
			if !write(msg) {
				return
			}
		}
	}
}

// stream is one open GET /events: the hub leaves the newest snapshot in
// ch, replacing one the stream has not taken yet (a slow reader skips
// snapshots, it never holds the others up).
type stream struct{ ch chan []byte }

// hub is the loop the streams share: it runs while at least one stream is
// open.
type hub struct {
	site *Site

	mu      sync.Mutex
	streams map[*stream]struct{}
	last    []byte        // the last snapshot sent
	stop    chan struct{} // closed to end the running loop; nil: no loop
	done    chan struct{} // closed when that loop returned
}

func (h *hub) join() (*stream, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.streams) >= h.site.c.MaxStreams {
		return nil, false
	}
	if h.streams == nil {
		h.streams = map[*stream]struct{}{}
	}
	c := &stream{ch: make(chan []byte, 1)}
	h.streams[c] = struct{}{}
	if h.stop == nil {
		h.stop, h.done = make(chan struct{}), make(chan struct{})
		h.last = nil
		go h.loop(h.stop, h.done)
	} else if h.last != nil {
		c.ch <- h.last
	}
	return c, true
}

// leave removes c; the last stream to leave stops the loop and waits for it.
func (h *hub) leave(c *stream) {
	h.mu.Lock()
	delete(h.streams, c)
	var stop, done chan struct{}
	if len(h.streams) == 0 && h.stop != nil {
		stop, done = h.stop, h.done
		h.stop, h.done = nil, nil
	}
	h.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// send gives b to every stream.
func (h *hub) send(b []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = b
	for c := range h.streams {
		select {
		case <-c.ch: // not taken yet: replaced
		default:
		}
		c.ch <- b // only the hub sends, and it holds mu
	}
}

type answers struct {
	reports []Answer
	round   uint64
}

// loop sends a snapshot at every leader change of the serving agent, after
// every round of answers and at least every Interval, and asks the other
// members every Interval and at every leader change, until stop.
func (h *hub) loop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	s := h.site
	var changes <-chan agent.LeaderChange
	if s.c.Watch != nil {
		ch, cancel := s.c.Watch()
		defer cancel()
		changes = ch
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticker := time.NewTicker(s.c.Interval)
	defer ticker.Stop()
	var (
		last    answers
		results = make(chan answers, 4)
		running int                // rounds whose result is not received yet
		round   uint64             // the round whose answers count
		under   context.CancelFunc // ends that round; nil when it is over
	)
	defer func() {
		cancel()
		for ; running > 0; running-- {
			<-results
		}
	}()
	// ask starts a round of asking the other members. A fresh round (after
	// a leader change) replaces one under way, whose answers may predate
	// the change; otherwise the round under way will do.
	ask := func(fresh bool) {
		if s.c.Ask == nil {
			return
		}
		if under != nil {
			if !fresh {
				return
			}
			under()
		}
		round++
		n, wait := round, waitFor(s.c.Status())
		rctx, rcancel := context.WithCancel(ctx)
		under = rcancel
		running++
		go func() {
			rs, err := s.c.Ask(rctx, s.askTimeout(), wait)
			if err != nil && rctx.Err() == nil {
				s.c.Log.Debug("site page: asking the group", "err", err)
			}
			results <- answers{reports: rs, round: n}
		}()
	}
	push := func() {
		b, err := json.Marshal(build(s.c.Status(), last.reports, time.Now()))
		if err != nil {
			s.c.Log.Warn("site page: snapshot", "err", err)
			return
		}
		h.send(b)
	}
	push()
	ask(true)
	for {
		select {
		case <-stop:
			if under != nil {
				under()
			}
			return
		case _, ok := <-changes:
			if !ok {
				changes = nil // the agent stopped: keep showing its last state
				continue
			}
			push()
			ask(true)
		case <-ticker.C:
			// With members to ask, the snapshot follows their answers
			// (within milliseconds, or askTimeout): the leader's lease
			// figure is then fresh. A round still under way pushes now.
			if s.c.Ask == nil || under != nil {
				push()
			}
			ask(false)
		case a := <-results:
			running--
			if a.round != round {
				continue // replaced by a fresh round
			}
			under()
			under = nil
			last = a
			push()
		}
	}
}
