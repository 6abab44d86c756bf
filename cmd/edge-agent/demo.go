package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/bus"
	"github.com/edge-agent/edge-agent/edge"
	"github.com/edge-agent/edge-agent/election"
)

// demoGateway is one agent of the demo site, in this process.
type demoGateway struct {
	id     string
	agent  *agent.Agent
	nc     *nats.Conn // election traffic
	pres   *nats.Conn // presence: what the leader's heartbeats announce
	sys    *nats.Conn // the server's disconnect advisories
	cancel context.CancelFunc
	done   chan error
}

// cmdDemo runs a whole site in one process: an embedded NATS server and N
// agents. It shows the first election, a crash failover (the leader's
// connection dropped with no handover) and a graceful handover, with times.
func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int("gateways", 5, "number of gateways (2..15)")
	hb := fs.Duration("heartbeat", 100*time.Millisecond, "heartbeat period H")
	algo := fs.String("algorithm", agent.AlgorithmBully, "election algorithm")
	verbose := fs.Bool("v", false, "show the agents' logs")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return printHelp(stdout, "edge-agent demo [--gateways N] [--heartbeat D] [--algorithm bully|ring] [-v]", "", fs)
		}
		fmt.Fprintf(stderr, "edge-agent demo: %v\n", err)
		return exitUsage
	}
	if *n < 2 || *n > 15 {
		fmt.Fprintln(stderr, "edge-agent demo: --gateways must be 2..15")
		return exitUsage
	}
	logOut := io.Discard
	if *verbose {
		logOut = stderr
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := runDemo(stdout, log, *n, *hb, *algo); err != nil {
		fmt.Fprintf(stderr, "edge-agent demo: %v\n", err)
		return exitFailure
	}
	return exitOK
}

func runDemo(out io.Writer, log *slog.Logger, n int, hb time.Duration, algo string) error {
	dir, err := os.MkdirTemp("", "edge-agent-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// A system account, so that the agents read the server's disconnect
	// advisories and fail over as soon as a leader's connection closes.
	sysUser := edge.SystemUser{User: "sys", Password: rand.Text()}
	srv, err := startServer(edge.EmbeddedConfig{Listen: "127.0.0.1:0", ServerName: "demo-site", System: &sysUser})
	if err != nil {
		return err
	}
	defer srv.Shutdown()

	var members []election.Member
	for i := 1; i <= n; i++ {
		members = append(members, election.Member{ID: fmt.Sprintf("gw%d", i), Priority: i * 10})
	}
	cfg := agent.Config{Group: "demo", Members: members, Algorithm: algo, Heartbeat: hb}
	probe := cfg // the settings every gateway ends up with, for the banner
	probe.ID, probe.StateDir = "gw1", dir
	if err := probe.Validate(); err != nil {
		return err
	}
	fmt.Fprintf(out, "demo site: %d gateways (%s), embedded NATS at %s\n", n, algo, srv.ClientURL())
	fmt.Fprintf(out, "heartbeat H=%s, suspect after D=%s, lease L=%s, quorum %d of %d\n\n",
		probe.Heartbeat, probe.SuspectAfter(), probe.Lease, probe.Quorum, n)

	gws := map[string]*demoGateway{}
	defer func() {
		for _, g := range gws {
			g.stop()
		}
	}()
	start := time.Now()
	for _, m := range members {
		c := cfg
		c.ID = m.ID
		c.StateDir = fmt.Sprintf("%s/%s", dir, m.ID)
		g, err := startDemoGateway(c, srv.ClientURL(), sysUser, log)
		if err != nil {
			return err
		}
		gws[m.ID] = g
		fmt.Fprintf(out, "  started %s (priority %d)\n", m.ID, m.Priority)
	}
	leader, term, err := waitAgreement(gws, "", 0, 10*time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nelected: %s leads term %d, %s after start-up (members first wait D for a live leader)\n", leader, term, ms(time.Since(start)))
	leader, term, err = demoCrash(out, gws, leader, term, probe.SuspectAfter())
	if err != nil {
		return err
	}
	return demoHandover(out, gws, leader, term)
}

// startDemoGateway starts the agent of one gateway of the demo site.
func startDemoGateway(c agent.Config, url string, sysUser edge.SystemUser, log *slog.Logger) (*demoGateway, error) {
	g := &demoGateway{id: c.ID, done: make(chan error, 1)}
	if err := g.connect(url, sysUser); err != nil {
		g.closeConns()
		return nil, err
	}
	a, err := agent.New(c, bus.WithNATS(g.nc, bus.Advisories(g.sys), bus.Presence(g.pres)),
		agent.WithLogger(log), agent.WithVersion(version), agent.WithNoLeaderWork())
	if err != nil {
		g.closeConns()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.agent, g.cancel = a, cancel
	go func() { g.done <- a.Run(ctx) }()
	return g, nil
}

// demoCrash kills the leader (its connections drop, no handover) and waits
// for the survivors to agree on a new one, which it returns.
func demoCrash(out io.Writer, gws map[string]*demoGateway, leader string, term uint64, suspectAfter time.Duration) (string, uint64, error) {
	fmt.Fprintf(out, "\ncrash: killing leader %s (its connection drops, no handover)\n", leader)
	crashed := gws[leader]
	t0 := time.Now()
	crashed.crash()
	delete(gws, leader)
	newLeader, newTerm, err := waitAgreement(gws, leader, term, 10*time.Second)
	if err != nil {
		return "", 0, err
	}
	fmt.Fprintf(out, "failover: %s leads term %d, %s after the crash; all %d survivors agree\n", newLeader, newTerm, ms(time.Since(t0)), len(gws))
	acted := 0
	for _, g := range gws {
		if fastSuspicions(g.agent) > 0 {
			acted++
		}
	}
	fmt.Fprintf(out, "          (the server saw %s's connection close: %d of %d survivors acted on its advisory;\n", leader, acted, len(gws))
	fmt.Fprintf(out, "          a silent failure, a frozen process or a cut cable, is found by missed heartbeats within D=%s)\n", suspectAfter)
	return newLeader, newTerm, nil
}

// demoHandover stops the leader gracefully, as on SIGTERM, and waits for
// the others to agree on its successor.
func demoHandover(out io.Writer, gws map[string]*demoGateway, leader string, term uint64) error {
	fmt.Fprintf(out, "\nhandover: stopping leader %s gracefully (as on SIGTERM)\n", leader)
	g := gws[leader]
	t1 := time.Now()
	g.cancel()
	<-g.done
	g.closeConns()
	delete(gws, leader)
	next, nextTerm, err := waitAgreement(gws, leader, term, 10*time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "handover: %s leads term %d, %s after the stop; all %d remaining agree\n", next, nextTerm, ms(time.Since(t1)), len(gws))
	return nil
}

// fastSuspicions reads an agent's edge_election_fast_suspicions_total: how
// often it elected at once on the server's report of its leader's
// connection closing.
func fastSuspicions(a *agent.Agent) float64 {
	mfs, err := a.Registry().Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == "edge_election_fast_suspicions_total" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// waitAgreement polls until every gateway reports the same leader, other
// than not, in a term above after, and that leader holds its lease.
func waitAgreement(gws map[string]*demoGateway, not string, after uint64, timeout time.Duration) (string, uint64, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		leader := ""
		agree := true
		for _, g := range gws {
			l := g.agent.Leader()
			if l == "" || l == not || (leader != "" && l != leader) {
				agree = false
				break
			}
			leader = l
		}
		if agree && leader != "" {
			if lg, ok := gws[leader]; ok && lg.agent.IsLeader() && lg.agent.Term() > after {
				return leader, lg.agent.Term(), nil
			}
		}
		time.Sleep(time.Millisecond)
	}
	return "", 0, fmt.Errorf("no agreed leader within %s", timeout)
}

// connect opens the gateway's three connections, as edge-agent run does
// with system-account credentials.
func (g *demoGateway) connect(url string, sys edge.SystemUser) error {
	var err error
	if g.nc, err = nats.Connect(url, bus.NATSOptions(agent.ConnName("demo", g.id))...); err != nil {
		return err
	}
	if g.pres, err = nats.Connect(url, bus.NATSOptions(agent.PresenceConnName("demo", g.id))...); err != nil {
		return err
	}
	g.sys, err = nats.Connect(url, nats.Name(agent.ConnName("demo", g.id)+"/advisories"), nats.UserInfo(sys.User, sys.Password))
	return err
}

// closeConns closes the election connection first: nothing the gateway's
// loop does afterwards reaches the others. (Closed first, the presence
// connection would make the leader step down and hand over on the election
// connection before the crash is complete: a handover, not a crash.)
func (g *demoGateway) closeConns() {
	for _, nc := range []*nats.Conn{g.nc, g.pres, g.sys} {
		if nc != nil {
			nc.Close()
		}
	}
}

// crash drops the gateway's connections first, as the kernel of a killed
// process does, so nothing it does afterwards (its loop would hand over on
// cancel) reaches the others: a SIGKILL.
func (g *demoGateway) crash() {
	g.closeConns()
	g.cancel()
	<-g.done
}

func (g *demoGateway) stop() {
	g.cancel()
	<-g.done
	g.closeConns()
}
