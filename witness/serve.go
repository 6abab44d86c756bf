package witness

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/bus"
	"github.com/edge-agent/edge-agent/config"
	"github.com/edge-agent/edge-agent/edge"
)

// ConnName names a witness process's NATS connection: no group's member
// connection, so no gateway takes its closing for a member's.
func ConnName(id string) string { return "edge-agent-witness/" + id }

// GCPercent is a witness process's GOGC unless the environment sets one.
const GCPercent = 50

// SetRuntimeDefaults sets the Go runtime as a witness process runs best,
// where the environment does not say otherwise (docs/DESIGN-NOTES.md):
//   - one processor (GOMAXPROCS): a witness's work is many small wake-ups,
//     and with one P none of them wakes a second thread to hand a message on
//     (13% of a core against 16-17% at 1,000 pairs);
//   - GOGC=50: the heap grows to half again its live data between
//     collections, not twice; a witness's live heap is mostly what it keeps
//     per group and changes slowly, so the collector's extra runs cost
//     little, and the box's memory is what it serves sites with (58 MiB
//     against 72 at 1,000 pairs).
func SetRuntimeDefaults() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
}

// MemoryLimit is the soft limit on the Go runtime's memory of a witness
// process serving n groups: run's limit, limit, and 160 KiB for each
// group's agent. It was set when an agent took about 70 KiB of heap and 70
// KiB of goroutine stacks (measured at 300 groups); since the host steps
// the agents on a few goroutines and their series are bare values, a group
// holds about 20 KiB of live heap (1,000 groups, GOGC=50: 58 MiB RSS), so
// the limit is far from what the groups need and only stops a flood from
// growing the process. A limit below that need would make the collector
// run without pause: at 48 KiB a group, 300 groups once spent a fifth of a
// core in it, shrinking and regrowing the same stacks.
func MemoryLimit(limit int64, n int) int64 { return limit + int64(n)*(160<<10) }

// Serve is `edge-agent witness`: it connects to the NATS servers of rc once
// and serves as the witness of every one of groups until ctx ends, with
// rc's HTTP endpoints, Pushgateway push and journal (one file per group,
// JOURNAL.GROUP), and systemd's readiness and watchdog notifications.
func Serve(ctx context.Context, rc *config.Config, groups []string, log *slog.Logger, version string) error {
	clientOpts, err := rc.NATSClient.Options()
	if err != nil {
		return err
	}
	// NoEcho: the groups' agents have nothing to say to each other, and
	// each would otherwise receive its own duplicate-process announcement
	// every heartbeat period, a seventh of what a thousand groups receive
	// (a second process with the same id connects on its own connection,
	// so it is still heard).
	opts := append(bus.NATSOptions(ConnName(rc.Agent.ID)), nats.NoEcho())
	opts = append(opts, edge.ReadBatch(rc.ReadBatch)...)
	nc, err := nats.Connect(strings.Join(rc.NATSURLs, ","), append(opts, clientOpts...)...)
	if err != nil {
		return fmt.Errorf("connect to NATS %s: %w", strings.Join(edge.RedactURLs(rc.NATSURLs), ","), err)
	}
	defer nc.Close()
	var undo []func()
	defer func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}()
	h, err := New(Config{Agent: rc.Agent, Groups: groups, Conn: nc, Log: log, Version: version,
		AgentOptions: journals(rc.Journal, &undo)})
	if err != nil {
		return err
	}
	if rc.HTTPAddr != "" {
		ln, err := net.Listen("tcp", rc.HTTPAddr)
		if err != nil {
			return fmt.Errorf("http_addr %s: %w", rc.HTTPAddr, err)
		}
		srv := &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		undo = append(undo, func() { srv.Close() })
		log.Info("http listening", "addr", ln.Addr().String())
	}
	if rc.Push.URL != "" {
		stop, err := push(rc.Push, rc.Agent.ID, h, log)
		if err != nil {
			return err
		}
		undo = append(undo, stop)
	}
	notifier, err := edge.NewSystemdNotifier(log)
	if err != nil {
		return err
	}
	if notifier.Enabled() {
		// READY=1 once connected; watchdog pings while every group's loop
		// runs (Host.Healthy), as for run.
		done := make(chan struct{})
		go func() { defer close(done); notifier.Run(ctx, h) }()
		undo = append(undo, func() { <-done })
	}
	return h.Run(ctx)
}

// push pushes the host's registry to the Pushgateway of c, grouped by job
// and instance (the witness's id); stop makes the last push.
func push(c edge.PushConfig, id string, h *Host, log *slog.Logger) (stop func(), err error) {
	c.Grouping = [][2]string{{"instance", id}}
	c.Gatherer = h.Registry()
	c.Logger = log
	p, err := edge.NewPusher(c)
	if err != nil {
		return nil, err
	}
	return p.Start(), nil
}

// journals gives each group's agent its own journal file, path with the
// group appended (path.GROUP); nil without a journal.
func journals(path string, undo *[]func()) func(string) ([]agent.Option, error) {
	if path == "" {
		return nil
	}
	return func(g string) ([]agent.Option, error) {
		f, err := os.OpenFile(path+"."+g, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		*undo = append(*undo, func() { f.Close() })
		return []agent.Option{agent.WithJournal(f)}, nil
	}
}
