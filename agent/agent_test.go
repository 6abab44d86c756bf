package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edge-agent/edge-agent/election"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// waitFor polls cond until it holds or the deadline passes (in a
// synctest bubble, on its virtual clock).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, what, cond)
}

// stall lets d pass on the fake clock of the test's bubble
// (testing/synctest): every test of this package that runs agents runs in
// one, so time moves on only once every goroutine of the bubble is blocked,
// and nothing here waits in real time.
func stall(d time.Duration) { <-time.After(d) }

type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

type testSite struct {
	t      *testing.T
	driven func(id string) bool // these agents run under a host (Drive), not Run
	net    *MemNetwork
	agents map[string]*Agent
	cancel map[string]context.CancelFunc
	done   map[string]chan error
	rec    map[string]*recorder
}

func newTestSite(t *testing.T, n int) *testSite { return newDrivenSite(t, n, nil) }

// newDrivenSite is newTestSite with the agents that driven names stepped
// by a host (driveAgent) instead of Run.
func newDrivenSite(t *testing.T, n int, driven func(id string) bool) *testSite {
	s := &testSite{t: t, driven: driven, net: NewMemNetwork(), agents: map[string]*Agent{}, cancel: map[string]context.CancelFunc{},
		done: map[string]chan error{}, rec: map[string]*recorder{}}
	var members []election.Member
	for i := 1; i <= n; i++ {
		members = append(members, election.Member{ID: fmt.Sprintf("gw%d", i), Priority: i})
	}
	for _, m := range members {
		s.start(m.ID, members)
	}
	t.Cleanup(func() {
		for id := range s.cancel {
			s.stop(id)
		}
	})
	return s
}

func (s *testSite) start(id string, members []election.Member) {
	cfg := Config{ID: id, Group: "site", Members: members, Heartbeat: 50 * time.Millisecond, StateDir: s.t.TempDir(), HoldDown: time.Hour}
	rec := &recorder{}
	driven := s.driven != nil && s.driven(id)
	woken := make(chan struct{}, 1)
	var host []Option
	if driven {
		host = append(host, DrivenBy(func() {
			select {
			case woken <- struct{}{}:
			default:
			}
		}))
	}
	a, err := New(cfg, append(host, WithTransport(s.net.Join(id)), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		WithCallbacks(Callbacks{
			OnStartedLeading: func(ctx context.Context, term uint64) {
				rec.add(fmt.Sprintf("started %d", term))
				<-ctx.Done()
				rec.add("ctx done")
			},
			OnStoppedLeading: func() { rec.add("stopped") },
			OnNewLeader:      func(l string, term uint64) { rec.add("leader " + l) },
		}))...)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	if driven {
		go func() { done <- driveAgent(ctx, a, woken) }()
	} else {
		go func() { done <- a.Run(ctx) }()
	}
	s.agents[id], s.cancel[id], s.done[id], s.rec[id] = a, cancel, done, rec
}

func (s *testSite) stop(id string) error {
	s.cancel[id]()
	err := <-s.done[id]
	delete(s.cancel, id)
	return err
}

// agreed returns the leader every listed agent reports, if they agree and it leads.
func (s *testSite) agreed(ids ...string) string {
	l := ""
	for i, id := range ids {
		got := s.agents[id].Leader()
		if got == "" || (i > 0 && got != l) {
			return ""
		}
		l = got
	}
	if !s.agents[l].IsLeader() {
		return ""
	}
	return l
}

// TestAgentElectsHighestAndReports runs in a synctest bubble: the agents'
// clocks, timers and waits are virtual, so the test neither sleeps nor
// depends on the machine's load.
func TestAgentElectsHighestAndReports(t *testing.T) {
	synctest.Test(t, testAgentElectsHighestAndReports)
}

func testAgentElectsHighestAndReports(t *testing.T) {
	s := newTestSite(t, 3)
	waitFor(t, 5*time.Second, "gw3 to lead", func() bool { return s.agreed("gw1", "gw2", "gw3") == "gw3" })
	a := s.agents["gw3"]
	if a.Term() == 0 {
		t.Fatal("leader at term 0")
	}
	st := a.Status()
	if st.Role != "leader" || st.Leader != "gw3" || st.Quorum.Size != 2 || !st.Quorum.OK || len(st.Members) != 3 {
		t.Fatalf("status = %+v", st)
	}
	if got := testutil.ToFloat64(a.m.isLeader); got != 1 {
		t.Fatalf("is_leader = %v", got)
	}
	if f := s.agents["gw1"]; f.IsLeader() || f.Status().Role != "follower" {
		t.Fatalf("gw1 status %+v", f.Status())
	}
}

func TestAgentIsolatedLeaderStepsDownAndMajorityElects(t *testing.T) {
	synctest.Test(t, testAgentIsolatedLeaderStepsDownAndMajorityElects)
}

func testAgentIsolatedLeaderStepsDownAndMajorityElects(t *testing.T) {
	s := newTestSite(t, 3)
	waitFor(t, 5*time.Second, "gw3 to lead", func() bool { return s.agreed("gw1", "gw2", "gw3") == "gw3" })
	term := s.agents["gw3"].Term()
	s.net.Isolate("gw3")
	waitFor(t, 5*time.Second, "gw3 to step down", func() bool { return !s.agents["gw3"].IsLeader() })
	waitFor(t, 5*time.Second, "gw2 to lead", func() bool { return s.agreed("gw1", "gw2") == "gw2" })
	if s.agents["gw2"].Term() <= term {
		t.Fatalf("new term %d not above %d", s.agents["gw2"].Term(), term)
	}
	// Callbacks of the old leader: started, then its ctx cancelled, then stopped.
	waitFor(t, 5*time.Second, "gw3 callbacks", func() bool {
		return strings.Contains(strings.Join(s.rec["gw3"].list(), ","), "stopped")
	})
	waitFor(t, 5*time.Second, "gw3 leading ctx cancelled", func() bool {
		return strings.Contains(strings.Join(s.rec["gw3"].list(), ","), "ctx done")
	})
	ev := strings.Join(s.rec["gw3"].list(), ",")
	// OnStartedLeading runs on a goroutine of its own, so "started" and
	// "leader gw3" (OnNewLeader) may come in either order.
	if i, j, k := strings.Index(ev, "started"), strings.Index(ev, "stopped"), strings.Index(ev, "leader gw3"); i < 0 || j < i || k < 0 || k > j {
		t.Fatalf("gw3 callbacks out of order: %s", ev)
	}
	s.net.Heal()
	waitFor(t, 5*time.Second, "one leader after heal", func() bool { return s.agreed("gw1", "gw2", "gw3") != "" })
}

func TestAgentTransferAndGracefulStop(t *testing.T) {
	synctest.Test(t, testAgentTransferAndGracefulStop)
}

func testAgentTransferAndGracefulStop(t *testing.T) {
	s := newTestSite(t, 3)
	waitFor(t, 5*time.Second, "gw3 to lead", func() bool { return s.agreed("gw1", "gw2", "gw3") == "gw3" })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.agents["gw1"].Resign(ctx); err != ErrNotLeader {
		t.Fatalf("resign on follower: %v", err)
	}
	if err := s.agents["gw3"].Transfer(ctx, "gw1"); err != nil {
		t.Fatal(err)
	}
	if s.agents["gw3"].IsLeader() {
		t.Fatal("gw3 still leader right after transfer returned")
	}
	waitFor(t, 2*time.Second, "gw1 to lead", func() bool { return s.agreed("gw1", "gw2", "gw3") == "gw1" })
	// SIGTERM-like stop of the leader hands over without waiting for D, to
	// the highest member whose acknowledgement it has (gw3, or gw2 when the
	// stop comes before gw1 has read gw3's vote: both are in the same
	// virtual instant).
	start := time.Now()
	if err := s.stop("gw1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "successor", func() bool { l := s.agreed("gw2", "gw3"); return l == "gw2" || l == "gw3" })
	cfg := s.agents["gw2"].Config()
	if took, d := time.Since(start), cfg.SuspectAfter(); took >= d {
		t.Fatalf("handover after stop took %s of virtual time, not under D = %s", took, d)
	}
}

func TestAgentRestartKeepsTerm(t *testing.T) { synctest.Test(t, testAgentRestartKeepsTerm) }

func testAgentRestartKeepsTerm(t *testing.T) {
	dir := t.TempDir()
	members := []election.Member{{ID: "solo"}}
	cfg := Config{ID: "solo", Group: "g", Members: members, Heartbeat: 20 * time.Millisecond, StateDir: dir}
	var last uint64
	for i := 0; i < 3; i++ {
		net := NewMemNetwork()
		a, err := New(cfg, WithTransport(net.Join("solo")), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		if a.Term() < last {
			t.Fatalf("restart %d: term went back from %d to %d", i, last, a.Term())
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		waitFor(t, 5*time.Second, "solo leads", a.IsLeader)
		if a.Term() <= last {
			t.Fatalf("restart %d: new leadership at term %d, not above %d", i, a.Term(), last)
		}
		last = a.Term()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestConfigValidateErrorsNameKeys(t *testing.T) {
	base := func() Config {
		return Config{ID: "a", Group: "g", Members: []election.Member{{ID: "a"}, {ID: "b"}, {ID: "c"}}, StateDir: "/tmp/x"}
	}
	cases := map[string]func(*Config){
		"id:":               func(c *Config) { c.ID = "zz" },
		"group:":            func(c *Config) { c.Group = "a b" },
		"members:":          func(c *Config) { c.Members = append(c.Members, election.Member{ID: "a"}) },
		"algorithm:":        func(c *Config) { c.Algorithm = "raft" },
		"quorum:":           func(c *Config) { c.Quorum = 1 },
		"heartbeat:":        func(c *Config) { c.Heartbeat = time.Millisecond },
		"heartbeat_misses:": func(c *Config) { c.HeartbeatMisses = 1 },
		"lease:":            func(c *Config) { c.Lease = 5 * time.Second },
		"preemption:":       func(c *Config) { c.Preemption = "sometimes" },
		"state_dir:":        func(c *Config) { c.StateDir = "" },
		"subject_prefix:":   func(c *Config) { c.SubjectPrefix = "a.*" },
	}
	for key, mut := range cases {
		c := base()
		mut(&c)
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), key) {
			t.Errorf("%s: err = %v", key, err)
		}
	}
	c := base()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Quorum != 2 || c.Lease >= c.SuspectAfter()-c.Heartbeat || c.Lease <= c.Heartbeat {
		t.Fatalf("defaults: %+v", c)
	}
}

// TestAgentRefusesMemberOfAnotherAlgorithm: gw1 runs Ring in a Bully group;
// the others refuse it (log, /status, metric) and it never takes part.
func TestAgentRefusesMemberOfAnotherAlgorithm(t *testing.T) {
	synctest.Test(t, testAgentRefusesMemberOfAnotherAlgorithm)
}

func testAgentRefusesMemberOfAnotherAlgorithm(t *testing.T) {
	net := NewMemNetwork()
	members := []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "gw3", Priority: 3}}
	agents := map[string]*Agent{}
	dirs := map[string]string{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, m := range members {
		dirs[m.ID] = t.TempDir()
		alg := AlgorithmBully
		if m.ID == "gw1" {
			alg = AlgorithmRing
		}
		a, err := New(Config{ID: m.ID, Group: "g", Members: members, Algorithm: alg, Heartbeat: 50 * time.Millisecond, StateDir: dirs[m.ID]},
			WithTransport(net.Join(m.ID)), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		agents[m.ID] = a
		wg.Add(1)
		go func() { defer wg.Done(); _ = a.Run(ctx) }()
	}
	waitFor(t, 5*time.Second, "gw3 to lead gw2", func() bool { return agents["gw3"].IsLeader() && agents["gw2"].Leader() == "gw3" })
	// gw1 shows itself when it speaks to a member (here its ring successor
	// gw2, when it stands): that member refuses it, in status and metric.
	waitFor(t, 5*time.Second, "gw2 to report gw1 refused", func() bool {
		mm := agents["gw2"].Status().AlgorithmMismatch
		return len(mm) == 1 && mm[0].Member == "gw1" && mm[0].Algorithm == AlgorithmRing
	})
	if v := testutil.ToFloat64(agents["gw2"].m.bad.WithLabelValues("algorithm_mismatch")); v == 0 {
		t.Fatal("mismatch not counted")
	}
	// gw1 refuses the Bully members too: it never follows and never votes.
	// gw3's heartbeats reach gw1, which refuses them and so never follows.
	waitFor(t, 5*time.Second, "gw1 to report gw3 refused", func() bool {
		for _, mm := range agents["gw1"].Status().AlgorithmMismatch {
			if mm.Member == "gw3" && mm.Algorithm == AlgorithmBully {
				return true
			}
		}
		return false
	})
	if l := agents["gw1"].Leader(); l != "" {
		t.Fatalf("gw1 follows %q", l)
	}
	// Neither side ever counted the other's vote: gw1 persisted no vote but
	// its own, and gw3 leads with gw2 alone.
	if b, err := os.ReadFile(filepath.Join(dirs["gw1"], "state.json")); err == nil {
		var hs election.HardState
		if err := json.Unmarshal(b, &hs); err != nil || (hs.VotedFor != "" && hs.VotedFor != "gw1") {
			t.Fatalf("gw1 persisted %s", b)
		}
	}
	waitFor(t, 5*time.Second, "gw3 leading gw2", func() bool { return agents["gw3"].IsLeader() && agents["gw2"].Leader() == "gw3" })
}

// fakeRoutes is a RouteWatcher whose routes a test sets.
type fakeRoutes struct {
	mu     sync.Mutex
	id     string
	routed map[string]bool
}

func (f *fakeRoutes) ServerID() string { return f.id }
func (f *fakeRoutes) RoutedServers() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]bool{}
	for k, v := range f.routed {
		out[k] = v
	}
	return out
}
func (f *fakeRoutes) set(r map[string]bool) { f.mu.Lock(); f.routed = r; f.mu.Unlock() }

// TestAgentLeaderStepsDownWhenRoutesToQuorumClose: a leader whose embedded
// server loses its routes to a quorum stops leading at once (the members
// beyond may be electing on the same route closures).
func TestAgentLeaderStepsDownWhenRoutesToQuorumClose(t *testing.T) {
	synctest.Test(t, testAgentLeaderStepsDownWhenRoutesToQuorumClose)
}

func testAgentLeaderStepsDownWhenRoutesToQuorumClose(t *testing.T) {
	net := NewMemNetwork()
	members := []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "gw3", Priority: 3}}
	routes := &fakeRoutes{id: "S3", routed: map[string]bool{"S1": true, "S2": true}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	agents := map[string]*Agent{}
	for _, m := range members {
		opts := []Option{WithTransport(net.Join(m.ID)), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
		if m.ID == "gw3" {
			opts = append(opts, WithRouteWatch(routes))
		}
		a, err := New(Config{ID: m.ID, Group: "g", Members: members, Heartbeat: 50 * time.Millisecond, StateDir: t.TempDir(), Preemption: PreemptNever}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		agents[m.ID] = a
		wg.Add(1)
		go func() { defer wg.Done(); _ = a.Run(ctx) }()
	}
	waitFor(t, 5*time.Second, "gw3 to lead", func() bool { return agents["gw3"].IsLeader() && agents["gw1"].Leader() == "gw3" })
	routes.set(map[string]bool{"S1": true}) // one route left: 2 of 3 still reachable
	stall(100 * time.Millisecond)           // two heartbeats: it must keep leading
	if !agents["gw3"].IsLeader() {
		t.Fatal("gw3 stepped down with a quorum still routed")
	}
	routes.set(map[string]bool{}) // alone
	waitFor(t, time.Second, "gw3 to stop leading", func() bool { return !agents["gw3"].IsLeader() })
	// It stepped down on the route loss, not because its lease ran out.
	sd := agents["gw3"].m.stepDowns
	waitFor(t, time.Second, "the step-down counted", func() bool { return testutil.ToFloat64(sd.WithLabelValues("route_lost")) == 1 })
	if v := testutil.ToFloat64(sd.WithLabelValues("lease_expired")); v != 0 {
		t.Fatalf("lease_expired step-downs: %v", v)
	}
}

// namedRoutes is a fakeRoutes that names the servers it routes to, as the
// embedded server does (ServerName of each member).
type namedRoutes struct {
	fakeRoutes
	names map[string]string
}

func (n *namedRoutes) RoutedServerNames() map[string]string {
	out := map[string]string{}
	for sid := range n.RoutedServers() {
		out[sid] = n.names[sid]
	}
	return out
}

// TestAgentLeaderStopsCountingMemberBehindClosedRoute: gw1 no longer hears
// the leader gw3, so gw3's lease rests on gw2's acknowledgements. When the
// route between gw3's and gw2's servers closes, gw2 may elect at once (its
// own server tells it), so gw3 must stop counting gw2 and step down at once,
// not when its lease runs out.
func TestAgentLeaderStopsCountingMemberBehindClosedRoute(t *testing.T) {
	synctest.Test(t, testAgentLeaderStopsCountingMemberBehindClosedRoute)
}

func testAgentLeaderStopsCountingMemberBehindClosedRoute(t *testing.T) {
	net := NewMemNetwork()
	members := []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "gw3", Priority: 3}}
	routes := &namedRoutes{
		fakeRoutes: fakeRoutes{id: "S3", routed: map[string]bool{"S1": true, "S2": true}},
		names:      map[string]string{"S1": ServerName("g", "gw1"), "S2": ServerName("g", "gw2")},
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	agents := map[string]*Agent{}
	for _, m := range members {
		opts := []Option{WithTransport(net.Join(m.ID)), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
		if m.ID == "gw3" {
			opts = append(opts, WithRouteWatch(routes))
		}
		a, err := New(Config{ID: m.ID, Group: "g", Members: members, Heartbeat: 50 * time.Millisecond, StateDir: t.TempDir(), Preemption: PreemptNever}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		agents[m.ID] = a
		wg.Add(1)
		go func() { defer wg.Done(); _ = a.Run(ctx) }()
	}
	waitFor(t, 5*time.Second, "gw3 to lead", func() bool { return agents["gw3"].IsLeader() && agents["gw1"].Leader() == "gw3" })
	net.CutOneWay("gw3", "gw1")
	waitFor(t, 5*time.Second, "gw1 to miss two heartbeats", func() bool {
		for _, m := range agents["gw1"].Status().Members {
			if m.ID == "gw3" {
				return m.LastSeenMS >= 100
			}
		}
		return false
	})
	sd := agents["gw3"].m.stepDowns
	net.Cut("gw2", "gw3")
	routes.set(map[string]bool{"S1": true}) // the route to gw2's server closes
	waitFor(t, 5*time.Second, "gw3 to stop leading", func() bool { return !agents["gw3"].IsLeader() })
	waitFor(t, time.Second, "the step-down counted", func() bool {
		return testutil.ToFloat64(sd.WithLabelValues("route_lost"))+testutil.ToFloat64(sd.WithLabelValues("lease_expired")) >= 1
	})
	if v := testutil.ToFloat64(sd.WithLabelValues("route_lost")); v != 1 {
		t.Fatalf("route_lost step-downs %v (lease_expired %v): gw3 kept counting gw2 behind the closed route",
			v, testutil.ToFloat64(sd.WithLabelValues("lease_expired")))
	}
}
