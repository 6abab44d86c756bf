package duty

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/poll"
)

// fakeLease is an agent that leads with a lease that never runs out.
type fakeLease struct {
	start   time.Time
	resigns atomic.Int32
}

func (l *fakeLease) Now() time.Duration              { return time.Since(l.start) }
func (l *fakeLease) LeaseEnd() (time.Duration, bool) { return l.Now() + time.Hour, true }
func (l *fakeLease) LeaseLength() time.Duration      { return time.Hour }
func (l *fakeLease) IsLeader() bool                  { return true }
func (l *fakeLease) Connected() bool                 { return true }
func (l *fakeLease) Resign(uint64) error             { l.resigns.Add(1); return nil }

func testHost(l Lease) Host {
	return Host{ID: "gw1", Group: "site", Lease: l,
		Timing:   Timing{Tick: 10 * time.Millisecond, Heartbeat: 100 * time.Millisecond, Lease: 250 * time.Millisecond},
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Restarts: func() {}, Running: func(bool) {}}
}

// TestAttachChecksTimingAndBindsOnce: a duty is checked against the host's
// timing (the grace must be shorter than the lease) and attached once.
func TestAttachChecksTimingAndBindsOnce(t *testing.T) {
	l := &fakeLease{start: time.Now()}
	bad := New(Config{Command: []string{"x"}, Grace: time.Second})
	if err := bad.Attach(testHost(l)); err == nil || !strings.HasPrefix(err.Error(), "leader.grace:") {
		t.Fatalf("grace over the lease: %v", err)
	}
	d := New(Config{Command: []string{"x"}})
	if err := d.Attach(Host{}); err == nil {
		t.Fatal("attached to an empty host")
	}
	if err := d.Attach(testHost(l)); err != nil {
		t.Fatal(err)
	}
	if g := d.Config().Grace; g != 250*time.Millisecond-100*time.Millisecond-10*time.Millisecond {
		t.Fatalf("default grace %s", g)
	}
	if err := d.Attach(testHost(l)); !errors.Is(err, ErrAttached) {
		t.Fatalf("second attach: %v", err)
	}
}

// TestLeadRunsHooksInOrderWithTheTerm: through the Lease seam alone, a
// leadership runs on_elected, and on_demoted once it ends, with the
// election variables set.
func TestLeadRunsHooksInOrderWithTheTerm(t *testing.T) {
	out := filepath.Join(t.TempDir(), "hooks")
	hook := []string{"sh", "-c", `echo "$EDGE_ELECTION_EVENT $EDGE_ELECTION_ID $EDGE_ELECTION_TERM" >> ` + out}
	d := New(Config{OnElected: hook, OnDemoted: hook})
	if err := d.Attach(testHost(&fakeLease{start: time.Now()})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := d.Lead(ctx, 7, new(atomic.Bool), func() bool { return true })
	read := func() string { b, _ := os.ReadFile(out); return string(b) }
	poll.Until(t, 10*time.Second, "on_elected", func() bool { return read() == "elected gw1 7\n" })
	cancel()
	<-done
	d.Wait()
	if got := read(); got != "elected gw1 7\ndemoted gw1 7\n" {
		t.Fatalf("hooks wrote %q", got)
	}
}
