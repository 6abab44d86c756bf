// Package witness runs one witness member for many groups in one process,
// over one NATS connection: the third vote of many two-gateway sites from
// one small box, a hub or a cloud machine (edge-agent witness).
//
// A witness votes, pre-votes and acknowledges the leader's heartbeats, so it
// counts for the quorum and the lease, but never stands or leads
// (agent.Config.Witnesses). Each group served gets the election agent it
// would get from `edge-agent run`, with its own state directory (term and
// vote, fsynced like any member's) and its own control subjects (status,
// drain), so the gateways cannot tell a shared witness from a dedicated one.
// What the groups share is the process, the NATS connection, the metrics
// registry and the HTTP endpoints. A witness needs no fast failover (it
// never stands), so it opens no advisory or presence connection.
package witness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/bus"
)

// InboxSize is how many inputs wait for each group's loop (bus.InboxSize):
// a witness receives a few messages per heartbeat period, and a thousand
// groups of the default 1024 would hold 200 MB.
const InboxSize = 32

// Config is what a witness host serves.
type Config struct {
	// Agent is the witness member's config, the same for every group but
	// the group itself: Agent.Group is replaced by each of Groups and
	// Agent.StateDir by StateDir/<group>. Agent.ID must be one of
	// Agent.Witnesses.
	Agent agent.Config
	// Groups are the groups served, each once.
	Groups []string
	// Conn is the NATS connection every group's election and control
	// traffic uses. The host does not close it.
	Conn *nats.Conn
	// Registry receives every group's metrics, labelled by group, and the
	// host's own (edge_witness_*). Nil: a registry of the host's own, with
	// the process's Go runtime and process collectors.
	Registry *prometheus.Registry
	// Log is the host's logger; each group's agent logs with its group.
	Log *slog.Logger
	// Version is the build's version, as status reports it.
	Version string
	// AgentOptions are added to every group's agent options (a journal,
	// for example).
	AgentOptions func(group string) ([]agent.Option, error)
}

// Host runs the witness member of every group of its Config.
type Host struct {
	c      Config
	reg    *prometheus.Registry
	groups []string                // served, in the order given
	shards []*shard                // step the agents (drive.go)
	agents map[string]*agent.Agent // by group

	mu     sync.Mutex
	failed map[string]error // groups whose agent stopped with an error

	running prometheus.Gauge
	stopped prometheus.Gauge
}

// New checks c, opens every group's state directory and builds its agent.
// Nothing is sent before Run. It takes over c.Conn's disconnect, reconnect
// and error handlers (bus.NewShared).
func New(c Config) (*Host, error) {
	if c.Conn == nil {
		return nil, errors.New("witness: no NATS connection")
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if len(c.Groups) == 0 {
		return nil, errors.New("witness: no group to serve")
	}
	if !c.Agent.IsWitness(c.Agent.ID) {
		return nil, fmt.Errorf("witness: id %q is not one of the witnesses (%v): a witness host serves only as a witness", c.Agent.ID, c.Agent.Witnesses)
	}
	cfgs := make([]agent.Config, len(c.Groups))
	seen := map[string]bool{}
	for i, g := range c.Groups {
		if seen[g] {
			return nil, fmt.Errorf("witness: group %q is listed twice", g)
		}
		seen[g] = true
		cfg := c.Agent
		cfg.Group = g
		cfg.StateDir = filepath.Join(c.Agent.StateDir, g)
		// The witness never stands: it has no use for the fast path's
		// reports, and needs no connection of its own to be watched.
		cfg.DisableFastFailover = true
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("witness: group %q: %w", g, err)
		}
		cfgs[i] = cfg
	}
	h := &Host{c: c, reg: c.Registry, groups: slices.Clone(c.Groups), agents: map[string]*agent.Agent{}, failed: map[string]error{}}
	if h.reg == nil {
		// The process's own: its Go runtime and process series (go_*,
		// process_*: the witness box's CPU, memory and GOMAXPROCS), as run
		// serves them.
		h.reg = prometheus.NewRegistry()
		h.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	h.running = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "edge_witness_groups", Help: "Groups this witness process serves."})
	h.stopped = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "edge_witness_groups_failed", Help: "Groups whose witness agent stopped with an error (see the log)."})
	if err := h.reg.Register(h.running); err != nil {
		return nil, fmt.Errorf("witness: metrics: %w", err)
	}
	if err := h.reg.Register(h.stopped); err != nil {
		return nil, fmt.Errorf("witness: metrics: %w", err)
	}
	led := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "edge_witness_groups_led", Help: "Groups served whose leader this witness knows."}, h.led)
	if err := h.reg.Register(led); err != nil {
		return nil, fmt.Errorf("witness: metrics: %w", err)
	}
	if err := h.build(cfgs); err != nil {
		h.release()
		return nil, err
	}
	h.running.Set(float64(len(h.groups)))
	return h, nil
}

// build builds every group's agent, each on a shard, sharing the
// connection and one family per metric name (agent.MetricFamilies).
func (h *Host) build(cfgs []agent.Config) error {
	c := h.c
	shared := bus.NewShared(c.Conn, c.Log)
	fam := agent.NewMetricFamilies(h.reg)
	h.shards = newShards(len(cfgs))
	for i, cfg := range cfgs {
		dr := &driven{group: cfg.Group, idx: -1}
		opts := []agent.Option{
			agent.WithLogger(c.Log), agent.WithVersion(c.Version), agent.WithRegistry(h.reg),
			agent.WithMetricFamilies(fam), agent.WithSparseMetrics(), bus.WithNATS(c.Conn, bus.InboxSize(InboxSize), bus.SharedConn(shared)),
			agent.DrivenBy(dr.wake),
		}
		if c.AgentOptions != nil {
			more, err := c.AgentOptions(cfg.Group)
			if err != nil {
				return fmt.Errorf("witness: group %q: %w", cfg.Group, err)
			}
			opts = append(opts, more...)
		}
		a, err := agent.New(cfg, opts...)
		if err != nil {
			return fmt.Errorf("witness: group %q: %w", cfg.Group, err)
		}
		h.agents[cfg.Group] = a
		dr.a = a
		h.shards[i%len(h.shards)].take(dr)
	}
	return nil
}

// release lets go of the state directories of agents built but never run.
func (h *Host) release() {
	for _, a := range h.agents {
		if d, err := a.Drive(); err == nil {
			_ = d.Stop() // closes its store
		}
	}
}

// Run runs every group's agent until ctx ends, on a few goroutines that
// step the agents (drive.go), not one each. A group whose agent stops with
// an error is logged and reported (Failed, edge_witness_groups_failed); the
// others go on serving: one group's trouble (its term at the bound, a state
// directory gone bad) must not take the third vote from every other site.
// Run returns when every agent stopped, with an error naming the groups that
// failed, if any.
func (h *Host) Run(ctx context.Context) error {
	h.c.Log.Info("witness serving", "id", h.c.Agent.ID, "groups", len(h.groups), "goroutines", len(h.shards))
	fail := func(g string, err error) {
		if ctx.Err() == nil { // as Run's error once ctx ended, not a failure
			h.fail(g, err)
		}
	}
	var wg sync.WaitGroup
	for _, sh := range h.shards {
		wg.Go(func() { sh.run(ctx, fail) })
	}
	wg.Wait()
	if failed := h.Failed(); len(failed) > 0 {
		h.mu.Lock()
		first := h.failed[failed[0]]
		h.mu.Unlock()
		return fmt.Errorf("witness: %d groups stopped with an error (first: %s: %w)", len(failed), failed[0], first)
	}
	return nil
}

// fail records that group g's agent stopped with err.
func (h *Host) fail(g string, err error) {
	h.c.Log.Error("witness agent stopped", "group", g, "err", err)
	h.mu.Lock()
	h.failed[g] = err
	n := len(h.failed)
	h.mu.Unlock()
	h.stopped.Set(float64(n))
}

// led counts the groups whose leader the witness knows.
func (h *Host) led() float64 {
	n := 0
	for _, a := range h.agents {
		if a.Leader() != "" {
			n++
		}
	}
	return float64(n)
}

// Healthy reports whether the election loop of every group whose agent did
// not fail ran recently (agent.Healthy): what systemd's watchdog checks. A
// failed group is reported apart (Failed, /healthz), not by stopping the
// watchdog, which would restart the witness of every other group too.
func (h *Host) Healthy() bool {
	h.mu.Lock()
	failed := maps.Clone(h.failed)
	h.mu.Unlock()
	for g, a := range h.agents {
		if _, ok := failed[g]; !ok && !a.Healthy() {
			return false
		}
	}
	return true
}

// Ready reports whether the host is connected to NATS: then it serves
// every group, whether or not the group's gateways are up.
func (h *Host) Ready() bool { return h.c.Conn.IsConnected() }

// Groups returns the groups served, in the order of the config.
func (h *Host) Groups() []string { return slices.Clone(h.groups) }

// Agent returns the witness agent of group g, if served.
func (h *Host) Agent(g string) (*agent.Agent, bool) {
	a, ok := h.agents[g]
	return a, ok
}

// Failed returns the groups whose agent stopped with an error, sorted.
func (h *Host) Failed() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.failed))
	for g := range h.failed {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// Registry returns the registry of every group's metrics and the host's.
func (h *Host) Registry() *prometheus.Registry { return h.reg }
