package bus

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/election"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/metricread"
	"github.com/edge-agent/edge-agent/internal/poll"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

func advisory(name, reason string) []byte {
	return []byte(fmt.Sprintf(`{"type":"io.nats.server.advisory.v1.client_disconnect","server":{"id":"NSRV"},"client":{"id":7,"name":%q},"reason":%q}`, name, reason))
}

func TestParseAdvisoryActsOnlyOnTheClientsOwnClose(t *testing.T) {
	id, conn, ok := parseAdvisory(advisory("edge-agent/site/gw3", "Client Closed"), "site")
	if !ok || id != "gw3" || conn != "NSRV/7" {
		t.Fatalf("genuine close: %q %q %v", id, conn, ok)
	}
	for _, data := range [][]byte{
		advisory("edge-agent/site/gw3", "Read Error"),       // a reset: the client may not know
		advisory("edge-agent/site/gw3", "Stale Connection"), // the server gave up on it
		advisory("edge-agent/site/gw3", "Slow Consumer (Write Deadline)"),
		advisory("edge-agent/other/gw3", "Client Closed"), // another group
		advisory("edge-agent/site/", "Client Closed"),     // no member
		advisory("plc-poller", "Client Closed"),           // not an agent
		[]byte(`{"type":"io.nats.server.advisory.v1.client_connect","client":{"id":7,"name":"edge-agent/site/gw3"},"server":{"id":"N"},"reason":"Client Closed"}`),
		[]byte(`garbage`),
	} {
		if id, conn, ok := parseAdvisory(data, "site"); ok {
			t.Errorf("acted on %s: %q %q", data, id, conn)
		}
	}
}

func TestParseAdvisoryReadsThePresenceConnection(t *testing.T) {
	id, conn, ok := parseAdvisory(advisory(agent.PresenceConnName("site", "gw3"), "Client Closed"), "site")
	if !ok || id != "gw3" || conn != "NSRV/7" {
		t.Fatalf("presence connection: %q %q %v", id, conn, ok)
	}
	// The system-account connection is no member's: it never matches a
	// leader (ids have no '/').
	if id, _, ok := parseAdvisory(advisory(agent.ConnName("site", "gw3")+"/advisories", "Client Closed"), "site"); ok && election.ValidID(id) {
		t.Fatalf("advisories connection read as member %q", id)
	}
}

// startSysServer starts a nats-server whose clients land in APP without
// credentials, with a system account reachable as sys/sys.
func startSysServer(t *testing.T) *server.Server {
	t.Helper()
	app, sys := server.NewAccount("APP"), server.NewAccount("SYS")
	s, err := harness.StartServer(&server.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Accounts: []*server.Account{app, sys}, SystemAccount: "SYS",
		Users: []*server.User{
			{Username: "app", Password: "app", Account: app},
			{Username: "sys", Password: "sys", Account: sys},
		},
		NoAuthUser: "app",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// TestPresenceConnection: a leader with a presence connection announces it
// in its heartbeats. When the presence connection closes while the process
// lives, the leader stops acting at once and hands over. When the process
// is gone (here: its election connection closed first, so it cannot hand
// over), the members elect on the server's advisory about the presence
// connection, without waiting for missed heartbeats.
func TestPresenceConnection(t *testing.T) {
	s := startSysServer(t)
	connect := func(name string, opts ...nats.Option) *nats.Conn {
		nc, err := nats.Connect(s.ClientURL(), append([]nats.Option{nats.Name(name)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	members := []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "gw3", Priority: 3}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	agents, buses := map[string]*agent.Agent{}, map[string]*Bus{}
	elec, pres := map[string]*nats.Conn{}, map[string]*nats.Conn{}
	for _, m := range members {
		pres[m.ID] = connect(agent.PresenceConnName("site", m.ID))
		elec[m.ID] = connect(agent.ConnName("site", m.ID), NATSOptions(agent.ConnName("site", m.ID))...)
		sys := connect("sys", nats.UserInfo("sys", "sys"))
		opts := []agent.Option{
			agent.WithBus(func(c agent.BusContext) (agent.Bus, error) {
				b, err := New(elec[m.ID], c, Presence(pres[m.ID]), Advisories(sys))
				buses[m.ID] = b
				return b, err
			}),
			agent.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		}
		// D = 1.5 s: a failover well under it can only come from the
		// advisory (or a hand-over).
		a, err := agent.New(agent.Config{ID: m.ID, Group: "site", Members: members, Heartbeat: 500 * time.Millisecond, StateDir: t.TempDir(), Preemption: agent.PreemptNever}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		agents[m.ID] = a
		wg.Add(1)
		go func() { defer wg.Done(); _ = a.Run(ctx) }()
	}
	// leads waits until id leads, the others follow it, and its heartbeats
	// have announced its presence connection to them.
	leads := func(id string) {
		t.Helper()
		waitFor(t, 15*time.Second, id+" to lead", func() bool {
			if !agents[id].IsLeader() {
				return false
			}
			for other, a := range agents {
				if other != id && a.Leader() != id {
					return false
				}
			}
			return true
		})
		want := connIdentity(pres[id])
		waitFor(t, 5*time.Second, id+" to announce its presence connection", func() bool {
			p := buses[id].pres.announced.Load()
			return p != nil && p.conn == want
		})
		// Two more heartbeats, so every follower has one that announces it.
		for other, a := range agents {
			if other == id {
				continue
			}
			hb := func() float64 {
				return counter(t, a, "edge_election_messages_total", map[string]string{"type": election.MsgHeartbeat.String(), "direction": "in"})
			}
			seen := hb()
			waitFor(t, 5*time.Second, "two heartbeats at "+other, func() bool { return hb() >= seen+2 })
		}
	}
	leads("gw3")

	// The process lives: the leader stops acting in the same step.
	pres["gw3"].Close()
	if agents["gw3"].IsLeader() {
		t.Fatal("gw3 still acts as leader after its presence connection closed")
	}
	leads("gw2") // gw3 handed over; it can lead again without presence (it announces its election connection)

	// The process is gone: no hand-over, only the server's advisory.
	fast := func() float64 {
		return counter(t, agents["gw1"], "edge_election_fast_suspicions_total", nil) + counter(t, agents["gw3"], "edge_election_fast_suspicions_total", nil)
	}
	before := fast()
	elec["gw2"].Close()
	if agents["gw2"].IsLeader() {
		t.Fatal("gw2 still acts as leader after its election connection closed")
	}
	closed := time.Now()
	pres["gw2"].Close()
	waitFor(t, 5*time.Second, "gw3 to lead", func() bool { return agents["gw3"].IsLeader() && agents["gw1"].Leader() == "gw3" })
	took := time.Since(closed)
	if fast() == before {
		t.Fatalf("no member acted on the advisory about gw2's presence connection (failover took %s)", took)
	}
	t.Logf("failover on the advisory in %s (D = 1.5 s)", took)
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, what, cond)
}

// counter reads the counter name of a's registry with the labels want
// (besides group); 0 when it has no such series.
func counter(t *testing.T, a *agent.Agent, name string, want map[string]string) float64 {
	t.Helper()
	v, _, err := metricread.Value(a.Registry(), name, want)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTermKeepsTheElectionConnectionItAnnounced: a leader without a presence
// connection announces its election connection. When that connection drops
// and reconnects before the loop has seen the drop, the members may already
// be electing on the server's report of the announced one: Up must say no
// for the term (the connection up now is not the one it announced), and the
// term keeps announcing the old identity, which the report matched. A later
// term announces the new connection.
func TestTermKeepsTheElectionConnectionItAnnounced(t *testing.T) {
	s := startSysServer(t)
	nc, err := nats.Connect(s.ClientURL(), nats.ReconnectWait(time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b := &Bus{nc: nc}
	first := b.announceConn(1)
	if first == "" || !b.Up(1) {
		t.Fatalf("announced %q, Up(1) %v: want the election connection, up", first, b.Up(1))
	}
	if err := nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a new election connection", func() bool {
		id := connIdentity(nc)
		return id != "" && id != first
	})
	if b.Up(1) {
		t.Fatalf("Up(1) is true on %s, but term 1 announced %s", connIdentity(nc), first)
	}
	if got := b.announceConn(1); got != first {
		t.Fatalf("term 1 announced %q after the reconnect, want %q as before", got, first)
	}
	if now := b.announceConn(2); now != connIdentity(nc) || !b.Up(2) {
		t.Fatalf("term 2 announced %q (Up %v), want the new connection %q", now, b.Up(2), connIdentity(nc))
	}
}

// TestNoFenceNotOverWebsocket: a heartbeat says NoFence only about a
// connection whose close the client marks before the server can read it;
// over a websocket nats.go sends the close frame first, so the bus drops
// the claim there.
func TestNoFenceNotOverWebsocket(t *testing.T) {
	s, err := harness.StartServer(&server.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Websocket: server.WebsocketOpts{Host: "127.0.0.1", Port: -1, NoTLS: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	ws := s.WebsocketURL()
	if ws == "" {
		t.Fatal("no websocket listener")
	}
	for _, c := range []struct {
		url  string
		want bool
	}{{s.ClientURL(), true}, {ws, false}} {
		nc, err := nats.Connect(c.url)
		if err != nil {
			t.Fatal(err)
		}
		b := &Bus{nc: nc, c: agent.BusContext{Fast: true}}
		hb := election.Message{Type: election.MsgHeartbeat, From: "gw1", Term: 1, Seq: 1, NoFence: true}
		if got := b.stamp(hb); got.Conn == "" || got.NoFence != c.want {
			t.Errorf("%s: stamped conn %q, nofence %v, want %v", c.url, got.Conn, got.NoFence, c.want)
		}
		nc.Close()
	}
}
