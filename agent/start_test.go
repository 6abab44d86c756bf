package agent

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// TestRunWithoutBusFails: a bus that cannot open ends Run with its error,
// and what Run had set up is undone (the state directory's lock released,
// so the agent can be built again); it once panicked instead.
func TestRunWithoutBusFails(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{ID: "gw1", Group: "site", Members: []election.Member{{ID: "gw1", Priority: 1}},
		Heartbeat: 100 * time.Millisecond, StateDir: dir}
	a, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "no bus") {
		t.Fatalf("Run without a bus: %v, want the bus's error", err)
	}
	b, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatalf("the state directory is still held after Run failed: %v", err)
	}
	_ = b.Run(context.Background())
}
