package edge

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/poll"

	"github.com/edge-agent/edge-agent/internal/logbuf"
)

// TestRouteReconnectErrorsLimited: a real embedded server whose routed peer
// went away reports the failed reconnects once, not once per attempt (one
// a second); the attempts left out still show at Debug.
func TestRouteReconnectErrorsLimited(t *testing.T) {
	peer := startTestServer(t, EmbeddedConfig{ServerName: "gw1", Cluster: &ClusterConfig{Name: "site", Listen: "127.0.0.1:0"}})
	var out logbuf.Buffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := startTestServer(t, EmbeddedConfig{ServerName: "gw2", Logger: log,
		Cluster: &ClusterConfig{Name: "site", Listen: "127.0.0.1:0", Routes: []string{peer.RouteURL()}}})
	poll.Until(t, 10*time.Second, "the route", func() bool { return s.NumRoutes() == 1 })
	peer.Shutdown()
	// nats-server retries every second; four failed attempts.
	poll.Until(t, 20*time.Second, "four failed reconnects", func() bool {
		return len(out.Lines("Error trying to connect to route (attempt 4)")) > 0
	})
	if errs := out.Lines("level=ERROR", "Error trying to connect to route"); len(errs) != 1 {
		t.Errorf("%d route errors logged for four failed attempts, want 1:\n%s", len(errs), strings.Join(errs, "\n"))
	}
	if dbg := out.Lines("level=DEBUG", "Error trying to connect to route (attempt 3)"); len(dbg) != 1 {
		t.Errorf("attempt 3 at Debug: %q", dbg)
	}
}

// TestRouteErrorsLimitedPerPeer: each peer's failures get their own budget
// (one peer's errors never hide another's), and the next line written after
// RouteErrorEvery carries the count left out.
func TestRouteErrorsLimitedPerPeer(t *testing.T) {
	var out logbuf.Buffer
	sl := newServerLogger(slog.New(slog.NewTextHandler(&out, nil)))
	var now time.Duration
	sl.routeLim.clock = func() time.Duration { return now }
	refused := func(addr string) error { return &testErr{"dial tcp " + addr + ": connect: connection refused"} }
	for i := 1; i <= 30; i++ {
		sl.Errorf(routeConnErrFmt, i, refused("10.0.0.2:6222"))
		sl.Errorf(routeConnErrFmt, i, refused("10.0.0.3:6222"))
		now += time.Second
	}
	for _, peer := range []string{"10.0.0.2:6222", "10.0.0.3:6222"} {
		if got := out.Lines("level=ERROR", peer); len(got) != 1 || !strings.Contains(got[0], "(attempt 1)") {
			t.Errorf("%s in the first 30 s: %q, want attempt 1 alone", peer, got)
		}
	}
	now = RouteErrorEvery + 2*time.Second
	sl.Errorf(routeConnErrFmt, 62, refused("10.0.0.2:6222"))
	got := out.Lines("level=ERROR", "10.0.0.2:6222", "(attempt 62)")
	if len(got) != 1 || !strings.Contains(got[0], "suppressed=29") {
		t.Errorf("after %s: %q, want attempt 62 with suppressed=29", RouteErrorEvery, got)
	}
	// Other errors keep the general limit: ten in a row.
	for range 20 {
		sl.Errorf("%s - something else", "cid:1")
	}
	if got := out.Lines("something else"); len(got) != LogBurst {
		t.Errorf("%d other errors logged, want %d", len(got), LogBurst)
	}
}

type testErr struct{ s string }

func (e *testErr) Error() string { return e.s }
