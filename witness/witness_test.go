package witness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/bus"
	"github.com/edge-agent/edge-agent/election"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var srvClient = &http.Client{Timeout: 5 * time.Second}

// pairConfig is member id's config in a group of gw1, gw2 and the witness
// w, at H = 50 ms.
func pairConfig(id, group, dir string) agent.Config {
	return agent.Config{
		ID: id, Group: group, Witnesses: []string{"w"},
		Members:   []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "w", Priority: 3}},
		Heartbeat: 50 * time.Millisecond, HeartbeatMisses: 4, Preemption: agent.PreemptNever,
		StateDir: dir,
	}
}

func TestNewRefuses(t *testing.T) {
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no connection", Config{Agent: pairConfig("w", "g", dir), Groups: []string{"a"}}, "no NATS connection"},
		{"no group", Config{Agent: pairConfig("w", "g", dir), Conn: nc}, "no group"},
		{"not a witness", Config{Agent: pairConfig("gw1", "g", dir), Conn: nc, Groups: []string{"a"}}, `id "gw1" is not one of the witnesses`},
		{"twice", Config{Agent: pairConfig("w", "g", dir), Conn: nc, Groups: []string{"a", "b", "a"}}, `group "a" is listed twice`},
		{"bad name", Config{Agent: pairConfig("w", "g", dir), Conn: nc, Groups: []string{"a", "b.c"}}, `group "b.c": group: "b.c" is not a valid group name`},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New: %v, want an error with %q", c.name, err, c.want)
		}
	}
	// A refusal after some groups' state directories were opened lets go of
	// them: a second host can open them all.
	locked, err := agent.OpenFileStore(filepath.Join(dir, "c"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Agent: pairConfig("w", "g", dir), Conn: nc, Groups: []string{"a", "b", "c"}, Log: quiet}); err == nil {
		t.Fatal("New succeeded with group c's state directory locked by another store")
	}
	locked.Close()
	h, err := New(Config{Agent: pairConfig("w", "g", dir), Conn: nc, Groups: []string{"a", "b", "c"}, Log: quiet})
	if err != nil {
		t.Fatalf("New after the lock was released: %v", err)
	}
	h.release()
}

// gateway is one gateway agent of a pair, in this process, on a
// connection of its own.
type gateway struct {
	a      *agent.Agent
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan error
}

func startGateway(t *testing.T, url, id, group, dir string) *gateway {
	t.Helper()
	nc, err := nats.Connect(url, bus.NATSOptions(agent.ConnName(group, id))...)
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(pairConfig(id, group, filepath.Join(dir, group, id)), agent.WithLogger(quiet), bus.WithNATS(nc))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &gateway{a: a, nc: nc, cancel: cancel, done: make(chan error, 1)}
	go func() { g.done <- a.Run(ctx) }()
	t.Cleanup(g.crash)
	return g
}

// crash takes the gateway down as a SIGKILL would: its connection first.
func (g *gateway) crash() {
	if g.cancel == nil {
		return
	}
	g.nc.Close()
	g.cancel()
	<-g.done
	g.cancel = nil
}

// leader waits until one of gws leads with a valid lease and every one
// of gws names it, and returns it.
func leader(t *testing.T, what string, gws ...*gateway) *gateway {
	t.Helper()
	var l *gateway
	poll.Until(t, 20*time.Second, what, func() bool {
		l = nil
		for _, g := range gws {
			if g.a.IsLeader() {
				l = g
			}
		}
		if l == nil {
			return false
		}
		for _, g := range gws {
			if g.a.Leader() != l.a.Config().ID {
				return false
			}
		}
		return true
	})
	return l
}

// TestHostServesGroups: one host is the witness of two pairs. Each pair
// elects a gateway, which the host names; the pair whose leader crashed
// elects its other gateway, which only the witness's vote allows; a group
// whose witness agent fails (its state directory gone when it must persist
// a vote) is reported, and the other group keeps its witness: its leader
// keeps its lease with one gateway down, on the witness's acknowledgements.
func TestHostServesGroups(t *testing.T) {
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL(), bus.NATSOptions("witness-test")...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	dir := t.TempDir()
	h, err := New(Config{Agent: pairConfig("w", "template", filepath.Join(dir, "w")), Conn: nc, Groups: []string{"a", "b"}, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- h.Run(ctx) }()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()

	gws := map[string][]*gateway{}
	for _, g := range []string{"a", "b"} {
		gws[g] = []*gateway{startGateway(t, ns.ClientURL(), "gw1", g, dir), startGateway(t, ns.ClientURL(), "gw2", g, dir)}
	}
	la, lb := leader(t, "a pair a leader", gws["a"]...), leader(t, "a pair b leader", gws["b"]...)
	poll.Until(t, 10*time.Second, "the witness names both leaders", func() bool {
		s := h.Summary()
		return s.Led == 2 && s.Group[0].Leader == la.a.Config().ID && s.Group[1].Leader == lb.a.Config().ID
	})
	var one agent.StatusReport
	getJSON(t, srv.URL+"/status?group=b", &one)
	if one.Group != "b" || !one.Witness || one.Leader != lb.a.Config().ID {
		t.Errorf("/status?group=b: %+v", one)
	}

	// Pair a's leader crashes: the other gateway leads on the witness's vote.
	la.crash()
	other := gws["a"][0]
	if other == la {
		other = gws["a"][1]
	}
	if l := leader(t, "pair a's other gateway leads", other); l != other {
		t.Fatal("pair a: the other gateway does not lead")
	}

	// Group b's witness loses its state directory; b's leader crashes, and
	// the witness's agent must persist a vote for the other gateway: it
	// fails, and is reported.
	if err := os.RemoveAll(filepath.Join(dir, "w", "b")); err != nil {
		t.Fatal(err)
	}
	lb.crash()
	poll.Until(t, 20*time.Second, "group b reported failed", func() bool {
		f := h.Failed()
		return len(f) == 1 && f[0] == "b"
	})
	if code := get(t, srv.URL+"/healthz"); code != 503 {
		t.Errorf("/healthz with group b failed: %d, want 503", code)
	}
	// Group a is still witnessed: its one gateway keeps its lease (one
	// gateway and the witness are its quorum) through more than a lease.
	term := other.a.Term()
	deadline := time.Now().Add(other.a.Config().Lease + 4*other.a.Config().Heartbeat)
	poll.Until(t, 20*time.Second, "pair a's leader through a lease after b failed", func() bool {
		if !other.a.IsLeader() || other.a.Term() != term {
			t.Fatalf("pair a's leader lost its lease (leading %v, term %d -> %d) after group b's witness failed", other.a.IsLeader(), term, other.a.Term())
		}
		return time.Now().After(deadline)
	})
	cancel()
	if err := <-ran; err == nil || !strings.Contains(err.Error(), "1 groups stopped with an error (first: b:") {
		t.Errorf("Run: %v, want the failure of group b", err)
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := srvClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := srvClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// A host steps its groups' agents on at most Shards goroutines, not one
// each, keeps every group's loop live, and on cancellation stops them all
// and lets go of their state directories.
func TestHostRunsGroupsOnFewGoroutines(t *testing.T) {
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL(), bus.NATSOptions("witness-test")...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	dir := t.TempDir()
	groups := make([]string, 3*Shards)
	for i := range groups {
		groups[i] = fmt.Sprintf("site%03d", i)
	}
	cfg := Config{Agent: pairConfig("w", "template", dir), Conn: nc, Groups: groups, Log: quiet}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- h.Run(ctx) }()
	// Every group's loop runs (Healthy needs each to have stepped within
	// its watchdog period) and answers status on its control subject.
	poll.Until(t, 10*time.Second, "every group's witness live", func() bool {
		_, err := client.Request(wire.ControlSubject(agent.DefaultSubjectPrefix, groups[len(groups)-1], wire.VerbStatus), nil, time.Second)
		return err == nil && h.Healthy()
	})
	// The shards', Run's own, and a few of the process that do not grow
	// with the groups (the shared connection's dispatchers and periodic
	// timers, the server's): a goroutine per group would add 96.
	if g := runtime.NumGoroutine() - before; g > Shards+8 {
		t.Errorf("%d groups run on %d more goroutines, want at most %d", len(groups), g, Shards+8)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	again, err := New(cfg)
	if err != nil {
		t.Fatalf("a host after Run returned cannot open the groups' state: %v", err)
	}
	again.release()
}
