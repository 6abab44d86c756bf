package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/bus"
	"github.com/edge-agent/edge-agent/config"
	"github.com/edge-agent/edge-agent/edge"
	"github.com/edge-agent/edge-agent/witness"
)

const witnessSynopsis = "edge-agent witness --config FILE [--groups G1,G2,... | --groups-file FILE] [run flags]"

const witnessHelp = `  --groups G1,G2,...
    	the groups to serve as their witness (default: the config's group)
  --groups-file FILE
    	the groups to serve, one per line (# starts a comment)

The config is the member's, as for run, the same for every group but the group:
its id must be one of its witnesses; each group's term and vote are kept in
state_dir/GROUP. Every other run flag applies (run -h lists them).
`

// cmdWitness serves as the witness member of many groups in one process,
// over one NATS connection (package witness).
func cmdWitness(args []string, stdout, stderr io.Writer) int {
	groups, rest, err := witnessGroups(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			var b strings.Builder
			config.Usage(&b)
			return printHelp(stdout, witnessSynopsis, witnessHelp+"\nrun flags:\n"+b.String(), nil)
		}
		fmt.Fprintf(stderr, "edge-agent witness: %v\n", err)
		return exitUsage
	}
	if len(groups) > 0 {
		// The config's group is a template; each served group replaces it.
		rest = append(rest, "--group="+groups[0])
	}
	rc, err := config.Load(rest)
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent witness: %v\n", err)
		return exitUsage
	}
	if len(groups) == 0 {
		groups = []string{rc.Agent.Group}
	}
	if err := witnessRefusals(rc); err != nil {
		fmt.Fprintf(stderr, "edge-agent witness: %v\n", err)
		return exitUsage
	}
	log := newLogger(stderr, rc.LogFormat, rc.LogLevel)
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(witnessMemoryLimit(len(groups)))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := runWitness(ctx, rc, groups, log); err != nil {
		log.Error("edge-agent witness failed", "err", err)
		return exitFailure
	}
	return exitOK
}

// witnessMemoryLimit is the soft limit on the Go heap of a witness process
// serving n groups: run's limit, and room for each group's agent.
func witnessMemoryLimit(n int) int64 { return defaultMemoryLimit + int64(n)*(48<<10) }

// witnessRefusals refuses what a witness process cannot do.
func witnessRefusals(rc *config.Config) error {
	if !rc.Agent.IsWitness(rc.Agent.ID) {
		return fmt.Errorf("id: %q is not one of witnesses %v: edge-agent witness serves only as a witness (a gateway runs edge-agent run)", rc.Agent.ID, rc.Agent.Witnesses)
	}
	if rc.EmbeddedNATS {
		return errors.New("embedded_nats: a witness process connects to the NATS servers the groups use (nats.urls); for a witness that runs the site's own server, use edge-agent run")
	}
	return nil
}

// witnessGroups takes --groups and --groups-file out of args, returning
// the groups they name (in order, each once) and the other arguments.
func witnessGroups(args []string) (groups, rest []string, err error) {
	var list, file string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if isHelp(arg) {
			return nil, nil, flag.ErrHelp
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if !strings.HasPrefix(arg, "-") || (name != "groups" && name != "groups-file") {
			rest = append(rest, arg)
			continue
		}
		if !hasVal {
			if i+1 == len(args) {
				return nil, nil, fmt.Errorf("--%s: give a value", name)
			}
			i++
			val = args[i]
		}
		if name == "groups" {
			list = val
		} else {
			file = val
		}
	}
	if list != "" && file != "" {
		return nil, nil, errors.New("--groups and --groups-file: give one of them")
	}
	if list != "" {
		for g := range strings.SplitSeq(list, ",") {
			if g = strings.TrimSpace(g); g != "" {
				groups = append(groups, g)
			}
		}
		if len(groups) == 0 {
			return nil, nil, errors.New("--groups: give at least one group")
		}
	}
	if file != "" {
		if groups, err = readGroupsFile(file); err != nil {
			return nil, nil, err
		}
	}
	seen := map[string]bool{}
	for _, g := range groups {
		if seen[g] {
			return nil, nil, fmt.Errorf("group %q is listed twice", g)
		}
		seen[g] = true
	}
	return groups, rest, nil
}

// readGroupsFile reads one group name per line; blank lines and what
// follows a # are ignored.
func readGroupsFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--groups-file: %w", err)
	}
	defer f.Close()
	var groups []string
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		g, _, _ := strings.Cut(sc.Text(), "#")
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		if strings.ContainsAny(g, " \t,") {
			return nil, fmt.Errorf("--groups-file %s:%d: %q: one group name per line", path, line, g)
		}
		groups = append(groups, g)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--groups-file %s: %w", path, err)
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("--groups-file %s: no group in it", path)
	}
	return groups, nil
}

// runWitness connects to NATS once and serves every group until ctx ends,
// with the HTTP endpoints and the Pushgateway push of rc.
func runWitness(ctx context.Context, rc *config.Config, groups []string, log *slog.Logger) error {
	clientOpts, err := rc.NATSClient.Options()
	if err != nil {
		return err
	}
	urls := strings.Join(rc.NATSURLs, ",")
	nc, err := nats.Connect(urls, append(bus.NATSOptions(witnessConnName(rc.Agent.ID)), clientOpts...)...)
	if err != nil {
		return fmt.Errorf("connect to NATS %s: %w", strings.Join(edge.RedactURLs(rc.NATSURLs), ","), err)
	}
	defer nc.Close()
	var undo cleanup
	defer undo.run()
	h, err := witness.New(witness.Config{
		Agent: rc.Agent, Groups: groups, Conn: nc, Log: log, Version: version,
		AgentOptions: witnessJournal(rc, &undo),
	})
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
		undo.add(func() { srv.Close() })
		log.Info("http listening", "addr", ln.Addr().String())
	}
	if rc.Push.URL != "" {
		c := rc.Push
		c.Grouping = [][2]string{{"instance", rc.Agent.ID}}
		c.Gatherer = h.Registry()
		c.Logger = log
		p, err := edge.NewPusher(c)
		if err != nil {
			return err
		}
		pctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); p.Run(pctx) }()
		undo.add(func() { cancel(); <-done })
		log.Info("pushing metrics to the Pushgateway", "url", edge.RedactURL(c.URL), "interval", c.Interval, "job", c.Job)
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
		undo.add(func() { <-done })
	}
	return h.Run(ctx)
}

// witnessConnName names a witness process's NATS connection: no group's
// member connection, so no gateway takes its closing for a member's.
func witnessConnName(id string) string { return "edge-agent-witness/" + id }

// witnessJournal gives each group's agent its own journal file, the
// config's journal path with the group appended (journal.GROUP).
func witnessJournal(rc *config.Config, undo *cleanup) func(string) ([]agent.Option, error) {
	if rc.Journal == "" {
		return nil
	}
	return func(g string) ([]agent.Option, error) {
		f, err := os.OpenFile(rc.Journal+"."+g, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		undo.add(func() { f.Close() })
		return []agent.Option{agent.WithJournal(f)}, nil
	}
}
