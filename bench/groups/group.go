package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/bus"
	"github.com/edge-agent/edge-agent/election"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// member is one agent running in this process on a NATS connection of its
// own, as a separate process would (the server cannot tell them apart).
type member struct {
	id     string
	nc     *nats.Conn
	own    bool       // nc is this member's own, closed with it
	sys    *nats.Conn // system-account connection, for advisories; may be nil
	a      *agent.Agent
	cancel context.CancelFunc
	done   chan error
}

// group is an election group of in-process agents on one NATS server.
type group struct {
	name      string
	url       string
	dir       string
	algorithm string
	hb        time.Duration
	members   []election.Member
	// advisories says which members get the server's disconnect advisories
	// (the fast failover path).
	advisories func(id string) bool
	running    map[string]*member
	// startedAt is when the last member (re)started.
	startedAt time.Time
	// hold, while set, delays the start of new members' loops until closed.
	hold chan struct{}
	// witness, when set, is a member of the group that runs elsewhere (a
	// witness process): it is in every member's list and witnesses, and
	// startAll does not start it.
	witness string
	// conns, when set, gives each member id a connection that it shares
	// with the same id of other groups (and a small inbox, sparse metrics):
	// the many simulated gateways of the witness benchmark, which would not
	// fit this machine with a connection each.
	conns map[string]sharedConn
}

// sharedConn is a connection that many groups' agents use.
type sharedConn struct {
	nc *nats.Conn
	s  *bus.Shared
}

func newGroup(name, url, dir, algorithm string, n int, hb time.Duration, advisories func(string) bool) *group {
	g := &group{name: name, url: url, dir: dir, algorithm: algorithm, hb: hb, advisories: advisories, running: map[string]*member{}}
	for i := 1; i <= n; i++ {
		g.members = append(g.members, election.Member{ID: fmt.Sprintf("gw%d", i), Priority: i})
	}
	return g
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// start launches member id: its own connection, its own state directory.
func (g *group) start(id string) error {
	opts := []agent.Option{agent.WithLogger(quiet)}
	var busOpts []bus.Option
	m := &member{id: id, done: make(chan error, 1)}
	if c, ok := g.conns[id]; ok {
		m.nc = c.nc
		busOpts = append(busOpts, bus.SharedConn(c.s), bus.InboxSize(32))
		opts = append(opts, agent.WithSparseMetrics())
	} else {
		nc, err := nats.Connect(g.url, bus.NATSOptions(agent.ConnName(g.name, id))...)
		if err != nil {
			return fmt.Errorf("%s/%s: connect: %w", g.name, id, err)
		}
		m.nc, m.own = nc, true
	}
	var err error
	if g.advisories != nil && g.advisories(id) {
		m.sys, err = nats.Connect(g.url, nats.Name(agent.ConnName(g.name, id)+"/advisories"),
			nats.UserInfo(harness.SystemUser, harness.SystemPassword))
		if err != nil {
			m.close()
			return fmt.Errorf("%s/%s: connect to the system account: %w", g.name, id, err)
		}
		busOpts = append(busOpts, bus.Advisories(m.sys))
	}
	opts = append(opts, bus.WithNATS(m.nc, busOpts...))
	cfg := agent.Config{
		ID: id, Group: g.name, Members: g.members, Algorithm: g.algorithm,
		Heartbeat: g.hb, HeartbeatMisses: 3, Preemption: agent.PreemptNever,
		StateDir: filepath.Join(g.dir, g.name, id),
	}
	if g.witness != "" {
		cfg.Witnesses = []string{g.witness}
	}
	m.a, err = agent.New(cfg, opts...)
	if err != nil {
		m.close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	hold := g.hold
	go func() {
		if hold != nil {
			<-hold
		}
		m.done <- m.a.Run(ctx)
	}()
	g.running[id] = m
	g.startedAt = time.Now()
	return nil
}

// newWitnessGroup is a group of n gateways gw1..gwn and the witness w,
// which another process runs.
func newWitnessGroup(name, url, dir string, n int, hb time.Duration, w string) *group {
	g := newGroup(name, url, dir, "bully", n, hb, nil)
	g.witness = w
	g.members = append(g.members, election.Member{ID: w, Priority: n + 1})
	return g
}

func (g *group) startAll() error {
	for _, m := range g.members {
		if m.ID == g.witness {
			continue
		}
		if err := g.start(m.ID); err != nil {
			return err
		}
	}
	return nil
}

// startAllAtOnce connects every member first, then starts all their loops
// together, so that their start-up waits (D) end within a few milliseconds
// of each other, as if the whole site powered up at once.
func (g *group) startAllAtOnce() error {
	g.hold = make(chan struct{})
	err := g.startAll()
	close(g.hold)
	g.hold = nil
	return err
}

func (m *member) close() {
	if m.own {
		m.nc.Close()
	}
	if m.sys != nil {
		m.sys.Close()
	}
}

// crash takes member id down like a SIGKILL: its connection closes first
// (the server sees it and publishes the advisory), so nothing the agent does
// afterwards, its handover on cancel included, reaches anyone.
func (g *group) crash(id string) {
	m := g.running[id]
	delete(g.running, id)
	m.close()
	m.cancel()
	<-m.done // the state directory lock is released
}

// stop ends every member.
func (g *group) stop() {
	for id := range g.running {
		g.crash(id)
	}
}

// stopAll stops the groups side by side: a member that leads and shares a
// connection (one that crash cannot close) hands over on its way out and
// waits up to a tick for its successor, so stopping a thousand groups one
// after the other took up to a thousand ticks (a heartbeat period each
// when the wait was bounded by one).
func stopAll(gs []*group) {
	var wg sync.WaitGroup
	for _, g := range gs {
		wg.Go(g.stop)
	}
	wg.Wait()
}

// agreement reports the leader every running member names, if they all name
// the same one, it leads with a valid lease and its term is above minTerm.
func (g *group) agreement(minTerm uint64) (string, uint64, bool) {
	leader := ""
	for _, m := range g.running {
		l := m.a.Leader()
		if l == "" || (leader != "" && l != leader) {
			return "", 0, false
		}
		leader = l
	}
	lm, ok := g.running[leader]
	if !ok || !lm.a.IsLeader() || lm.a.Term() <= minTerm {
		return "", 0, false
	}
	return leader, lm.a.Term(), true
}

// waitAgreement checks agreement every interval until it holds or timeout
// passes. The interval is fixed (poll.Every) and short: the deliveries are
// counted from the crash until the members agree.
func (g *group) waitAgreement(minTerm uint64, every, timeout time.Duration) (string, uint64, error) {
	var leader string
	var term uint64
	err := poll.Every(every, timeout, fmt.Sprintf("agreement above term %d", minTerm), func() (bool, string) {
		var ok bool
		leader, term, ok = g.agreement(minTerm)
		return ok, ""
	})
	if err != nil {
		return "", 0, fmt.Errorf("group %s: %w", g.name, err)
	}
	return leader, term, nil
}

// leaders counts the running members that lead with a valid lease.
func (g *group) leaders() int {
	n := 0
	for _, m := range g.running {
		if m.a.IsLeader() {
			n++
		}
	}
	return n
}

// electionIn sums, over the running members but except, the election
// messages they received: edge_election_messages_total{direction="in"}
// without the steady-state heartbeats and acknowledgements.
func (g *group) electionIn(except string) (int, error) {
	total := 0
	for id, m := range g.running {
		if id == except {
			continue
		}
		mfs, err := m.a.Registry().Gather()
		if err != nil {
			return 0, err
		}
		for _, mf := range mfs {
			if mf.GetName() != "edge_election_messages_total" {
				continue
			}
			for _, metric := range mf.GetMetric() {
				labels := map[string]string{}
				for _, lp := range metric.GetLabel() {
					labels[lp.GetName()] = lp.GetValue()
				}
				t, ok := election.ParseMsgType(labels["type"])
				if labels["direction"] == "in" && ok && t.IsElectionTraffic() {
					total += int(metric.GetCounter().GetValue())
				}
			}
		}
	}
	return total, nil
}
