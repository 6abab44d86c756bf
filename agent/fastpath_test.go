package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edge-agent/edge-agent/election"
)

// countingRoutes is a RouteWatcher that also counts its routes, as the
// embedded server does.
type countingRoutes struct {
	fakeRoutes
}

func (c *countingRoutes) NumRoutes() int { return len(c.RoutedServers()) }

// TestRoutePollerWakesTheLoop: the poller reports at once when the number of
// routes falls, and not when it stays or grows.
func TestRoutePollerWakesTheLoop(t *testing.T) { synctest.Test(t, testRoutePollerWakesTheLoop) }

func testRoutePollerWakesTheLoop(t *testing.T) {
	const h = 100 * time.Millisecond
	routes := &countingRoutes{fakeRoutes{id: "S3", routed: map[string]bool{"S1": true, "S2": true}}}
	mb := NewMailbox(1)
	defer mb.Close()
	stop := WatchRoutes(routes, h, mb, nil)
	defer stop()
	routes.set(map[string]bool{"S1": true, "S2": true, "S4": true}) // grows
	select {
	case r := <-mb.C():
		t.Fatalf("reported %+v while no route closed", r)
	case <-time.After(20 * routePoll(h)):
	}
	routes.set(map[string]bool{"S1": true})
	start := time.Now()
	select {
	case r := <-mb.C():
		if r.Kind != InputRoutesClosed || len(r.Closed) != 2 || r.Routes != 1 {
			t.Fatalf("reported %+v, want S2 and S4 closed, 1 route left", r)
		}
		if took := time.Since(start); took > routePoll(h) {
			t.Fatalf("reported %s after the routes closed, want within one poll (%s)", took, routePoll(h))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no report after routes closed")
	}
}

// TestRoutePollerSeesASwap: a route that closed while another opened keeps
// the number of routes; the poller still reports it within H.
func TestRoutePollerSeesASwap(t *testing.T) { synctest.Test(t, testRoutePollerSeesASwap) }

func testRoutePollerSeesASwap(t *testing.T) {
	const h = 100 * time.Millisecond
	routes := &countingRoutes{fakeRoutes{id: "S3", routed: map[string]bool{"S1": true, "S2": true}}}
	mb := NewMailbox(4)
	defer mb.Close()
	stop := WatchRoutes(routes, h, mb, nil)
	defer stop()
	routes.set(map[string]bool{"S1": true, "S4": true})
	start := time.Now()
	r := <-mb.C()
	if r.Kind != InputRoutesClosed || len(r.Closed) != 1 || r.Closed[0].ID != "S2" {
		t.Fatalf("reported %+v, want S2 closed", r)
	}
	if took := time.Since(start); took > h+routePoll(h) {
		t.Fatalf("the swap was reported after %s, want within H + one poll", took)
	}
}

// TestRoutePollerReportsAgainWhenTheMailboxWasFull: a report the loop could
// not take is not lost: it comes with the next poll that finds room.
func TestRoutePollerReportsAgainWhenTheMailboxWasFull(t *testing.T) {
	synctest.Test(t, testRoutePollerReportsAgainWhenTheMailboxWasFull)
}

func testRoutePollerReportsAgainWhenTheMailboxWasFull(t *testing.T) {
	const h = 100 * time.Millisecond
	routes := &countingRoutes{fakeRoutes{id: "S3", routed: map[string]bool{"S1": true, "S2": true}}}
	mb := NewMailbox(1)
	defer mb.Close()
	if !mb.Offer(Input{Kind: InputMessage}) {
		t.Fatal("an empty mailbox refused an input")
	}
	var dropped atomic.Int32
	stop := WatchRoutes(routes, h, mb, func(string) { dropped.Add(1) })
	defer stop()
	routes.set(map[string]bool{"S1": true})
	stall(3 * routePoll(h)) // three polls find the mailbox full
	synctest.Wait()
	if dropped.Load() == 0 {
		t.Fatal("a report that did not fit was not counted")
	}
	<-mb.C() // make room
	r := <-mb.C()
	if r.Kind != InputRoutesClosed || len(r.Closed) != 1 || r.Closed[0].ID != "S2" {
		t.Fatalf("reported %+v, want S2 closed", r)
	}
}

func TestRoutePollFollowsH(t *testing.T) {
	for h, want := range map[time.Duration]time.Duration{
		100 * time.Millisecond: 5 * time.Millisecond,
		time.Second:            50 * time.Millisecond,
		20 * time.Millisecond:  2 * time.Millisecond,
		0:                      2 * time.Millisecond,
	} {
		if got := routePoll(h); got != want {
			t.Errorf("routePoll(%s) = %s, want %s", h, got, want)
		}
	}
}

// fastSite starts members gw1..gwN (priority = index) on an in-memory
// network that reports disconnects as a NATS server's advisories do; wrap
// may replace a member's transport. start(id) starts a member; the agents
// stop when the test ends.
type fastSite struct {
	t       *testing.T
	net     *MemNetwork
	members []election.Member
	agents  map[string]*Agent
	cfg     func(id string) Config
	wrap    func(id string, tr Transport) Transport
	ctx     context.Context
	wg      sync.WaitGroup
}

func newFastSite(t *testing.T, n int, wrap func(string, Transport) Transport) *fastSite {
	s := &fastSite{t: t, net: NewMemNetwork(), agents: map[string]*Agent{}, wrap: wrap}
	s.net.ReportDisconnects()
	for i := 1; i <= n; i++ {
		s.members = append(s.members, election.Member{ID: fmt.Sprintf("gw%d", i), Priority: i})
	}
	s.cfg = func(id string) Config {
		return Config{ID: id, Group: "g", Members: s.members, Heartbeat: 100 * time.Millisecond,
			StateDir: t.TempDir(), Preemption: PreemptNever}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.ctx = ctx
	t.Cleanup(func() { cancel(); s.wg.Wait() })
	return s
}

func (s *fastSite) start(id string, cfg Config, opts ...Option) *Agent {
	var tr Transport = s.net.Join(id)
	if s.wrap != nil {
		tr = s.wrap(id, tr)
	}
	a, err := New(cfg, append([]Option{WithTransport(tr), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.agents[id] = a
	s.wg.Add(1)
	go func() { defer s.wg.Done(); _ = a.Run(s.ctx) }()
	return a
}

// startStoppable starts member id as start does, but on a context of its
// own: stop cancels it and returns once Run has returned (again at once
// after that). The agent is not in s.agents.
func (s *fastSite) startStoppable(id string, cfg Config) (a *Agent, stop func()) {
	a, err := New(cfg, WithTransport(s.net.Join(id)), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); _ = a.Run(ctx) }()
	return a, func() { cancel(); <-ran }
}

// TestAgentFastFailoverOnDisconnectReport: when the leader's connection
// closes, it stops acting in the same step, and the members, told so by
// the bus, elect a successor at once instead of after D of silence.
func TestAgentFastFailoverOnDisconnectReport(t *testing.T) {
	synctest.Test(t, testAgentFastFailoverOnDisconnectReport)
}

func testAgentFastFailoverOnDisconnectReport(t *testing.T) {
	s := newFastSite(t, 3, nil)
	for _, m := range s.members {
		s.start(m.ID, s.cfg(m.ID))
	}
	waitFor(t, 5*time.Second, "gw3 to lead", func() bool {
		return s.agents["gw3"].IsLeader() && s.agents["gw1"].Leader() == "gw3" && s.agents["gw2"].Leader() == "gw3"
	})
	stall(300 * time.Millisecond) // heartbeats announcing gw3's connection reach both members
	term := s.agents["gw3"].Term()
	start := time.Now()
	s.net.Disconnect("gw3")
	if s.agents["gw3"].IsLeader() {
		t.Fatal("gw3 still acts as leader after its connection dropped")
	}
	waitFor(t, 5*time.Second, "gw2 to lead", func() bool {
		return s.agents["gw2"].IsLeader() && s.agents["gw1"].Leader() == "gw2" && s.agents["gw2"].Term() > term
	})
	cfg := s.agents["gw2"].Config()
	d := cfg.SuspectAfter()
	if took := time.Since(start); took >= d {
		t.Fatalf("failover took %s of virtual time, not under D = %s: the report was not acted on", took, d)
	}
	if v := testutil.ToFloat64(s.agents["gw1"].m.fastSuspicions); v < 1 {
		t.Fatalf("gw1 counted %v fast suspicions, want at least 1", v)
	}
}

// delayedVotes delays this member's votes (its acknowledgements of a
// COORDINATOR) to member to: they are on their way while the test acts.
type delayedVotes struct {
	Transport
	to      string
	delay   time.Duration
	pending *sync.WaitGroup
}

func (d delayedVotes) Send(m election.Message) error {
	if m.Type != election.MsgVote || m.To != d.to {
		return d.Transport.Send(m)
	}
	d.pending.Add(1)
	go func() {
		defer d.pending.Done()
		stall(d.delay)
		_ = d.Transport.Send(m)
	}()
	return nil
}

// TestAgentCandidateWhoseConnectionDroppedDoesNotLead: a candidate whose
// own connection drops stops standing at once. The server may already have
// told the members, whose backing of what it sent on that connection the
// report releases, so an acknowledgement still on its way when the
// connection dropped must not make it leader (the agent's side of
// election's TestCandidateWhoseConnectionClosedDoesNotLead).
func TestAgentCandidateWhoseConnectionDroppedDoesNotLead(t *testing.T) {
	synctest.Test(t, testAgentCandidateWhoseConnectionDroppedDoesNotLead)
}

func testAgentCandidateWhoseConnectionDroppedDoesNotLead(t *testing.T) {
	var pending sync.WaitGroup
	t.Cleanup(pending.Wait) // after the agents stopped (cleanups run last first)
	s := newFastSite(t, 3, func(id string, tr Transport) Transport {
		if id == "gw3" {
			return tr
		}
		return delayedVotes{Transport: tr, to: "gw3", delay: 50 * time.Millisecond, pending: &pending}
	})
	immediate := func(id string) Config {
		c := s.cfg(id)
		c.Preemption = PreemptImmediate // gw2 hands over to gw3 as soon as it is healthy
		return c
	}
	s.start("gw1", immediate("gw1"))
	s.start("gw2", immediate("gw2"))
	waitFor(t, 5*time.Second, "gw2 to lead", func() bool { return s.agents["gw2"].IsLeader() })
	cfg := immediate("gw3")
	gw3 := s.start("gw3", cfg)
	changes, stop := gw3.Watch()
	defer stop()
	waitFor(t, 5*time.Second, "gw3 to stand", func() bool { return gw3.Status().Role == election.Candidate.String() })
	term := gw3.Term()
	s.net.Disconnect("gw3") // the acknowledgements of its announcement are on their way
	synctest.Wait()
	s.net.Heal() // back on a new connection before they arrive
	valid := gw3.Config()
	stall(3 * valid.SuspectAfter())
	for drained := false; !drained; {
		synctest.Wait() // the watcher has queued what it has
		select {
		case c := <-changes:
			if c.Leader == "gw3" && c.Term == term {
				t.Fatalf("gw3 led term %d, which it stood in when its connection dropped", term)
			}
		default:
			drained = true
		}
	}
	if gw3.IsLeader() && gw3.Term() == term {
		t.Fatalf("gw3 leads term %d, which it stood in when its connection dropped", term)
	}
}

// TestAgentNoFenceAfterReportAndResign: a member elected on a report that
// its leader's connection closed waits the fence before it acts, unless the
// RESIGN of that leader's term came too: the leader sent it only once it
// had stopped leading. The case of a SIGTERM: the leader hands over and
// exits, and the server's report of its closed connection reaches a member
// before the RESIGN sent just before it (they travel on different
// connections).
func TestAgentNoFenceAfterReportAndResign(t *testing.T) {
	synctest.Test(t, testAgentNoFenceAfterReportAndResign)
}

func testAgentNoFenceAfterReportAndResign(t *testing.T) {
	const fence = 150 * time.Millisecond // less than the lease
	s := newFastSite(t, 3, nil)
	for _, m := range s.members[:2] {
		cfg := s.cfg(m.ID)
		cfg.Fence = fence
		s.start(m.ID, cfg)
	}
	// gw3 runs on a context of its own: it exits after its handover.
	cfg := s.cfg("gw3")
	cfg.Fence = fence
	gw3, stop3 := s.startStoppable("gw3", cfg)
	defer stop3()
	waitFor(t, 5*time.Second, "gw3 to lead", func() bool {
		return gw3.IsLeader() && s.agents["gw1"].Leader() == "gw3" && s.agents["gw2"].Leader() == "gw3"
	})
	stall(300 * time.Millisecond) // heartbeats announcing gw3's connection reach both members
	term := gw3.Term()
	s.net.mu.Lock()
	conn := s.net.connIDLocked("gw3")
	s.net.mu.Unlock()
	// gw3 hands over to gw2 and exits; its RESIGN is held back (sent again
	// below), and the server's report of its closed connection reaches gw2
	// first. gw1 still backs gw3 and keeps gw2's request.
	s.net.CutOneWay("gw3", "gw1")
	s.net.CutOneWay("gw3", "gw2")
	if err := gw3.Transfer(context.Background(), "gw2"); err != nil {
		t.Fatal(err)
	}
	stop3()
	start := time.Now()
	s.net.mu.Lock()
	s.net.nodes["gw2"].reports.Offer(Input{Kind: InputMemberGone, Member: "gw3", Conn: conn})
	s.net.mu.Unlock()
	waitFor(t, time.Second, "gw2 to stand", func() bool { return s.agents["gw2"].Term() > term })
	synctest.Wait()
	if s.agents["gw2"].IsLeader() {
		t.Fatal("gw2 leads with gw1 still backing gw3")
	}
	// The RESIGN arrives: gw1 is released and grants gw2's kept request.
	s.net.Heal()
	if err := s.net.Join("gw3").Send(election.Message{Type: election.MsgResign, From: "gw3", Term: term, Nominee: "gw2"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "gw2 to lead", func() bool { return s.agents["gw2"].IsLeader() })
	if took := time.Since(start); took >= fence {
		t.Fatalf("gw2 acted %s after the report: it waited the fence of %s after gw3's RESIGN", took, fence)
	}
	if v := testutil.ToFloat64(s.agents["gw2"].m.fastSuspicions); v < 1 {
		t.Fatalf("gw2 counted %v fast suspicions: it did not act on the report", v)
	}
}

// TestShutdownKeepsTheConnectionUntilTheSuccessorLeads: a leader that
// hands over on shutdown keeps its connection open until a heartbeat of
// its successor's term reached it. Closing at once let the server's report
// of the closed connection reach members before the RESIGN (the two travel
// on different connections), and they then elected as after a crash, with
// the fence. With no successor heard it closes a tick after the handover.
func TestShutdownKeepsTheConnectionUntilTheSuccessorLeads(t *testing.T) {
	synctest.Test(t, testShutdownKeepsTheConnectionUntilTheSuccessorLeads)
}

func testShutdownKeepsTheConnectionUntilTheSuccessorLeads(t *testing.T) {
	s := newFastSite(t, 3, nil)
	for _, m := range s.members[:2] {
		s.start(m.ID, s.cfg(m.ID))
	}
	gw3, stop3 := s.startStoppable("gw3", s.cfg("gw3"))
	waitFor(t, 5*time.Second, "gw3 to lead", func() bool {
		return gw3.IsLeader() && s.agents["gw1"].Leader() == "gw3" && s.agents["gw2"].Leader() == "gw3"
	})
	term := gw3.Term()
	cfg3 := s.cfg("gw3")
	tick := cfg3.Tick()
	start := time.Now()
	stop3()
	heard, ok := s.net.heardBeforeClose("gw3")
	if !ok {
		t.Fatal("gw3's transport did not close")
	}
	if heard <= term {
		t.Fatalf("gw3 closed its connection with no heartbeat of a later term than its own %d heard (highest %d): the report of its closing could overtake its RESIGN", term, heard)
	}
	if took := time.Since(start); took >= tick {
		t.Fatalf("gw3 took %s to stop: it waited out the tick rather than stop on its successor's heartbeat", took)
	}
	waitFor(t, 5*time.Second, "gw2 to lead", func() bool { return s.agents["gw2"].IsLeader() && s.agents["gw2"].Term() > term })

	// gw3 again, now hearing no one: it leaves a tick after its RESIGN.
	gw3, stop3 = s.startStoppable("gw3", s.cfg("gw3"))
	waitFor(t, 5*time.Second, "gw3 to follow gw2", func() bool { return gw3.Leader() == "gw2" })
	stall(300 * time.Millisecond) // gw2 hears gw3's acknowledgements: it hands over to gw3
	if err := s.agents["gw2"].Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "gw3 to lead again", func() bool {
		return gw3.IsLeader() && s.agents["gw1"].Leader() == "gw3" && s.agents["gw2"].Leader() == "gw3"
	})
	term = gw3.Term()
	s.net.CutOneWay("gw1", "gw3")
	s.net.CutOneWay("gw2", "gw3")
	start = time.Now()
	stop3()
	if took := time.Since(start); took != tick {
		t.Fatalf("gw3 took %s to stop with no successor heard, want one tick, %s", took, tick)
	}
	if heard, ok := s.net.heardBeforeClose("gw3"); !ok || heard > term {
		t.Fatalf("gw3's transport closed %v, having heard a heartbeat of term %d through a cut link", ok, heard)
	}

	// And once more: its connection drops while it waits. Nothing is left
	// open to keep, so it stops at once.
	s.net.Heal()
	gw3, stop3 = s.startStoppable("gw3", s.cfg("gw3"))
	waitFor(t, 5*time.Second, "gw3 to follow", func() bool { return gw3.Leader() != "" && gw3.Leader() != "gw3" })
	stall(300 * time.Millisecond)
	if err := s.agents[gw3.Status().Leader].Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "gw3 to lead a third time", func() bool {
		return gw3.IsLeader() && s.agents["gw1"].Leader() == "gw3" && s.agents["gw2"].Leader() == "gw3"
	})
	s.net.CutOneWay("gw1", "gw3")
	s.net.CutOneWay("gw2", "gw3")
	stopped := make(chan struct{})
	go func() { stop3(); close(stopped) }()
	synctest.Wait() // gw3 handed over and waits
	select {
	case <-stopped:
		t.Fatal("gw3 stopped before the tick without a successor heard")
	default:
	}
	// An API request meanwhile is refused at once, not left waiting.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := gw3.Drain(ctx, true); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Drain while gw3 stops: %v, want %v", err, ErrNotRunning)
	}
	start = time.Now()
	s.net.Disconnect("gw3")
	<-stopped
	if took := time.Since(start); took != 0 {
		t.Fatalf("gw3 took %s to stop after its connection dropped, want no wait", took)
	}
}

// TestShutdownWithNoSuccessorDoesNotWait: a leader whose RESIGN names no
// nominee (here the only member) has no successor to wait for and stops at
// once.
func TestShutdownWithNoSuccessorDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFastSite(t, 1, nil)
		a, stop := s.startStoppable("gw1", s.cfg("gw1"))
		waitFor(t, 5*time.Second, "gw1 to lead", a.IsLeader)
		start := time.Now()
		stop()
		if took := time.Since(start); took != 0 {
			t.Fatalf("the only member took %s to stop, want no wait", took)
		}
	})
}

// steppedMember returns gw1 of a three-member group on the in-memory
// network, built but not running: a test steps it by hand (step, process,
// onMemberGone) and reads its state between steps.
func steppedMember(t *testing.T) *Agent {
	members := []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "gw3", Priority: 3}}
	cfg := Config{ID: "gw1", Group: "g", Members: members, Heartbeat: 100 * time.Millisecond, StateDir: t.TempDir(), Preemption: PreemptNever}
	net := NewMemNetwork()
	net.ReportDisconnects()
	a, err := New(cfg, WithTransport(net.Join("gw1")), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.store.Close() })
	return a
}

// TestFenceLiftedOnlyByTheReportedLeadersResign: after a report releases a
// member from its leader, only that leader's RESIGN of the term it was
// backed in lifts the fence; a RESIGN of an earlier term or of another
// member does not.
func TestFenceLiftedOnlyByTheReportedLeadersResign(t *testing.T) {
	const term = 5
	for _, tc := range []struct {
		name   string
		resign election.Message
		lifted bool
	}{
		{"the reported leader, its term", election.Message{Type: election.MsgResign, From: "gw3", Term: term}, true},
		{"the reported leader, an earlier term", election.Message{Type: election.MsgResign, From: "gw3", Term: term - 1}, false},
		{"another member", election.Message{Type: election.MsgResign, From: "gw2", Term: term}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := steppedMember(t)
			const conn = "gw3-conn"
			a.step(election.Message{Type: election.MsgHeartbeat, From: "gw3", Term: term, Seq: 1, Conn: conn})
			if err := a.process(); err != nil {
				t.Fatal(err)
			}
			if a.core.leader != "gw3" {
				t.Fatalf("gw1 follows %q after gw3's heartbeat, want gw3", a.core.leader)
			}
			a.onMemberGone("gw3", conn)
			if a.fenceUntil() == 0 {
				t.Fatal("no fence after acting on the report")
			}
			a.step(tc.resign)
			if lifted := a.fenceUntil() == 0; lifted != tc.lifted {
				t.Fatalf("after %s of term %d from %s: fence lifted %v, want %v", tc.resign.Type, tc.resign.Term, tc.resign.From, lifted, tc.lifted)
			}
		})
	}
}

// loggedStore records each save of a FileStore, in order with the sends
// that loggedSends records.
type loggedStore struct {
	*FileStore
	id  string
	log *recorder
}

func (s loggedStore) Save(hs election.HardState) error {
	err := s.FileStore.Save(hs)
	s.log.add(fmt.Sprintf("%s saved %d/%s", s.id, hs.Term, hs.VotedFor))
	return err
}

// loggedSends records each COORDINATOR and granted vote a member sends.
type loggedSends struct {
	Transport
	id  string
	log *recorder
}

func (l loggedSends) Send(m election.Message) error {
	switch {
	case m.Type == election.MsgCoordinator:
		l.log.add(fmt.Sprintf("%s sent coordinator %d", l.id, m.Term))
	case m.Type == election.MsgVote && m.Granted:
		l.log.add(fmt.Sprintf("%s sent vote %d to %s", l.id, m.Term, m.To))
	}
	return l.Transport.Send(m)
}

// TestAgentRequestLeavesBeforeItsPersist: on the fast path the candidate's
// COORDINATOR leaves before its vote for itself is saved (the save then runs
// while the request travels, election.Ready.SendFirst), while every voter
// saves its vote before the vote leaves.
func TestAgentRequestLeavesBeforeItsPersist(t *testing.T) {
	synctest.Test(t, testAgentRequestLeavesBeforeItsPersist)
}

func testAgentRequestLeavesBeforeItsPersist(t *testing.T) {
	var log recorder
	index := func(line string) int { return slices.Index(log.list(), line) }
	s := newFastSite(t, 3, func(id string, tr Transport) Transport { return loggedSends{Transport: tr, id: id, log: &log} })
	for _, m := range s.members {
		cfg := s.cfg(m.ID)
		fs, err := OpenFileStore(cfg.StateDir)
		if err != nil {
			t.Fatal(err)
		}
		s.start(m.ID, cfg, WithStore(loggedStore{FileStore: fs, id: m.ID, log: &log}))
	}
	waitFor(t, 5*time.Second, "gw3 to lead", func() bool {
		return s.agents["gw3"].IsLeader() && s.agents["gw1"].Leader() == "gw3" && s.agents["gw2"].Leader() == "gw3"
	})
	stall(300 * time.Millisecond) // heartbeats announcing gw3's connection reach both members
	term := s.agents["gw3"].Term()
	s.net.Disconnect("gw3")
	waitFor(t, 5*time.Second, "gw2 to lead", func() bool {
		return s.agents["gw2"].IsLeader() && s.agents["gw1"].Leader() == "gw2"
	})
	next := s.agents["gw2"].Term()
	if next <= term {
		t.Fatalf("gw2 leads term %d, not above %d", next, term)
	}
	request := index(fmt.Sprintf("gw2 sent coordinator %d", next))
	own := index(fmt.Sprintf("gw2 saved %d/gw2", next))
	if request < 0 || own < 0 || request > own {
		t.Fatalf("gw2's request at %d, the save of its own vote at %d: want the request first; %v", request, own, log.list())
	}
	saved := index(fmt.Sprintf("gw1 saved %d/gw2", next))
	vote := index(fmt.Sprintf("gw1 sent vote %d to gw2", next))
	if saved < 0 || vote < 0 || saved > vote {
		t.Fatalf("gw1 saved its vote at %d and sent it at %d: want the save first; %v", saved, vote, log.list())
	}
}
