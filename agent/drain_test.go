package agent

import (
	"context"
	"encoding/json"
	"errors"
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

	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/election"
)

// maintSite is a site whose members keep their state directories across
// restarts, with a short hold-down, and whose buses can be made to report
// a duplicate of a member's id.
type maintSite struct {
	t       *testing.T
	net     *MemNetwork
	members []election.Member
	dirs    map[string]string
	agents  map[string]*Agent
	cancel  map[string]context.CancelFunc
	done    map[string]chan error
	led     map[string]*countLeads
	dup     map[string]chan Input
}

// countLeads counts the leaderships an agent started.
type countLeads struct {
	mu sync.Mutex
	n  int
}

func (c *countLeads) get() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

func newMaintSite(t *testing.T, n int) *maintSite {
	s := &maintSite{t: t, net: NewMemNetwork(), dirs: map[string]string{}, agents: map[string]*Agent{},
		cancel: map[string]context.CancelFunc{}, done: map[string]chan error{}, led: map[string]*countLeads{},
		dup: map[string]chan Input{}}
	for i := 1; i <= n; i++ {
		s.members = append(s.members, election.Member{ID: fmt.Sprintf("gw%d", i), Priority: i})
	}
	for _, m := range s.members {
		s.dirs[m.ID] = t.TempDir()
		s.start(m.ID)
	}
	t.Cleanup(func() {
		for id := range s.cancel {
			s.stop(id)
		}
	})
	return s
}

// dupBus adds the inputs of extra to a bus's own: the reports of a
// duplicate that the NATS bus makes from another process's announcements.
type dupBus struct {
	Bus
	extra chan Input
	done  chan struct{}
}

func (b *dupBus) Open(h BusHooks) (<-chan Input, error) {
	in, err := b.Bus.Open(h)
	if err != nil {
		return nil, err
	}
	out := make(chan Input)
	go func() {
		defer close(out)
		for {
			var v Input
			select {
			case x, ok := <-in:
				if !ok {
					return
				}
				v = x
			case v = <-b.extra:
			case <-b.done:
				return
			}
			select {
			case out <- v:
			case <-b.done:
				return
			}
		}
	}()
	return out, nil
}

func (b *dupBus) Close() error {
	close(b.done)
	return b.Bus.Close()
}

func (s *maintSite) start(id string) {
	cfg := Config{ID: id, Group: "site", Members: s.members, Heartbeat: 50 * time.Millisecond, StateDir: s.dirs[id],
		HoldDown: 500 * time.Millisecond}
	led := &countLeads{}
	extra := make(chan Input)
	tr := s.net.Join(id)
	a, err := New(cfg, WithBus(func(c BusContext) (Bus, error) {
		return &dupBus{newTransportBus(tr, c), extra, make(chan struct{})}, nil
	}),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		WithCallbacks(Callbacks{OnStartedLeading: func(ctx context.Context, term uint64) {
			led.mu.Lock()
			led.n++
			led.mu.Unlock()
		}}))
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	s.agents[id], s.cancel[id], s.done[id], s.led[id], s.dup[id] = a, cancel, done, led, extra
}

func (s *maintSite) stop(id string) {
	s.cancel[id]()
	if err := <-s.done[id]; err != nil {
		s.t.Errorf("%s: %v", id, err)
	}
	delete(s.cancel, id)
}

// leader returns the member every running agent names, if they agree and
// it leads.
func (s *maintSite) leader() string {
	l := ""
	for id := range s.cancel {
		got := s.agents[id].Leader()
		if got == "" || (l != "" && got != l) {
			return ""
		}
		l = got
	}
	if l == "" || s.cancel[l] == nil || !s.agents[l].IsLeader() {
		return ""
	}
	return l
}

func TestAgentDrainHandsOverPersistsAndUndrains(t *testing.T) {
	synctest.Test(t, testAgentDrainHandsOverPersistsAndUndrains)
}

func testAgentDrainHandsOverPersistsAndUndrains(t *testing.T) {
	s := newMaintSite(t, 3)
	waitFor(t, 5*time.Second, "gw3 leads", func() bool { return s.leader() == "gw3" })
	gw3 := s.agents["gw3"]
	if err := gw3.Drain(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if gw3.IsLeader() {
		t.Fatal("gw3 still leads after Drain returned")
	}
	waitFor(t, time.Second, "gw2 leads", func() bool { return s.leader() == "gw2" })
	if st := gw3.Status(); !st.Drained {
		t.Errorf("gw3's status does not say drained: %+v", st)
	}
	if v := testutil.ToFloat64(gw3.maint.drainedGauge); v != 1 {
		t.Errorf("edge_election_drained = %v, want 1", v)
	}
	// The leader learns it from gw3's acknowledgements.
	waitFor(t, time.Second, "the leader knows gw3 is drained", func() bool {
		for _, m := range s.agents["gw2"].Status().Members {
			if m.ID == "gw3" {
				return m.Drained
			}
		}
		return false
	})
	// Six hold-downs later gw3 has not been handed leadership back.
	leads := s.led["gw3"].get()
	stall(3 * time.Second)
	if l := s.leader(); l != "gw2" || s.led["gw3"].get() != leads {
		t.Fatalf("after the hold-down: leader %q, gw3 led %d more times", l, s.led["gw3"].get()-leads)
	}
	if err := s.agents["gw2"].Transfer(context.Background(), "gw3"); !errors.Is(err, election.ErrDrained) {
		t.Errorf("transfer to the drained gw3: %v", err)
	}
	// Kept across a restart: it does not stand even once.
	s.stop("gw3")
	data, err := os.ReadFile(filepath.Join(s.dirs["gw3"], "drained.json"))
	if err != nil || !strings.Contains(string(data), `"drained":true`) {
		t.Fatalf("drained.json: %q, %v", data, err)
	}
	s.start("gw3")
	if !s.agents["gw3"].Drained() {
		t.Fatal("gw3 is not drained after its restart")
	}
	stall(3 * time.Second)
	if s.led["gw3"].get() != 0 || s.leader() != "gw2" {
		t.Fatalf("after gw3's restart: it led %d times, leader %q", s.led["gw3"].get(), s.leader())
	}
	// Undrained, hold-down preemption hands leadership back to it.
	if err := s.agents["gw3"].Drain(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "gw3 leads again", func() bool { return s.leader() == "gw3" })
}

func TestAgentDrainControlRequest(t *testing.T) { synctest.Test(t, testAgentDrainControlRequest) }

// The control path: only the member named answers; a signed request must
// name that member's term.
func testAgentDrainControlRequest(t *testing.T) {
	s := newMaintSite(t, 3)
	waitFor(t, 5*time.Second, "gw3 leads", func() bool { return s.leader() == "gw3" })
	ask := func(id, verb string, req ControlRequest, signed bool) (ControlReply, bool) {
		body, _ := json.Marshal(req)
		got := make(chan []byte, 1)
		c := &ControlInput{Verb: verb, Signed: signed, Data: body, Reply: func(p []byte) { got <- p }}
		s.dup[id] <- Input{Kind: InputControl, Control: c} // as the bus hands it to the loop
		select {
		case p := <-got:
			var r ControlReply
			if err := json.Unmarshal(p, &r); err != nil {
				t.Fatal(err)
			}
			return r, true
		case <-time.After(time.Second):
			return ControlReply{}, false
		}
	}
	if _, answered := ask("gw1", wire.VerbDrain, ControlRequest{Member: "gw3"}, false); answered {
		t.Fatal("gw1 answered a drain of gw3")
	}
	if r, _ := ask("gw3", wire.VerbDrain, ControlRequest{Member: "gw3", Term: 99, Nonce: "x"}, true); r.OK {
		t.Fatal("a signed drain of another term was accepted")
	}
	if s.agents["gw3"].Drained() {
		t.Fatal("drained by a refused request")
	}
	r, ok := ask("gw3", wire.VerbDrain, ControlRequest{Member: "gw3"}, false)
	if !ok || !r.OK || !s.agents["gw3"].Drained() {
		t.Fatalf("drain: %+v answered=%v", r, ok)
	}
	waitFor(t, time.Second, "gw2 leads", func() bool { return s.leader() == "gw2" })
	if r, ok := ask("gw3", wire.VerbUndrain, ControlRequest{Member: "gw3"}, false); !ok || !r.OK || s.agents["gw3"].Drained() {
		t.Fatalf("undrain: %+v", r)
	}
}

func TestAgentAllDrainedNoLeader(t *testing.T) { synctest.Test(t, testAgentAllDrainedNoLeader) }

func testAgentAllDrainedNoLeader(t *testing.T) {
	s := newMaintSite(t, 3)
	waitFor(t, 5*time.Second, "a leader", func() bool { return s.leader() != "" })
	for _, m := range s.members {
		if err := s.agents[m.ID].Drain(context.Background(), true); err != nil {
			t.Fatal(err)
		}
	}
	stall(3 * time.Second)
	for _, m := range s.members {
		st := s.agents[m.ID].Status()
		if st.Leader != "" || st.NoLeaderReason == "" {
			t.Fatalf("%s with every member drained: leader %q, reason %q", m.ID, st.Leader, st.NoLeaderReason)
		}
	}
	if err := s.agents["gw1"].Drain(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "gw1 leads", func() bool { return s.leader() == "gw1" })
}

func TestAgentDuplicateIDStandsAside(t *testing.T) { synctest.Test(t, testAgentDuplicateIDStandsAside) }

// A member told that another process speaks with its id steps down (a
// handover), sends nothing while it hears it, and takes part again once it
// was silent for DuplicateHold*D.
func testAgentDuplicateIDStandsAside(t *testing.T) {
	s := newMaintSite(t, 3)
	waitFor(t, 5*time.Second, "gw3 leads", func() bool { return s.leader() == "gw3" })
	gw3 := s.agents["gw3"]
	d := gw3.cfg.SuspectAfter()
	stop := make(chan struct{})
	go func() { // the other process announces itself every H
		for {
			select {
			case s.dup["gw3"] <- Input{Kind: InputDuplicate, Conn: "otherhost/42/cafe"}:
			case <-stop:
				return
			}
			select {
			case <-time.After(gw3.cfg.Heartbeat):
			case <-stop:
				return
			}
		}
	}()
	waitFor(t, time.Second, "gw2 leads", func() bool { return s.leader() == "gw2" })
	leads := s.led["gw3"].get()
	stall(5 * time.Second)
	st := gw3.Status()
	if st.DuplicateInstance != "otherhost/42/cafe" || testutil.ToFloat64(gw3.maint.dupGauge) != 1 {
		t.Fatalf("while the duplicate speaks: status %+v, gauge %v", st, testutil.ToFloat64(gw3.maint.dupGauge))
	}
	if s.led["gw3"].get() != leads || s.leader() != "gw2" {
		t.Fatalf("gw3 led again while quarantined (leader %q)", s.leader())
	}
	// It sends nothing: the leader stops hearing its acknowledgements.
	waitFor(t, time.Second, "the leader sees gw3 silent", func() bool {
		for _, m := range s.agents["gw2"].Status().Members {
			if m.ID == "gw3" {
				return !m.Alive
			}
		}
		return false
	})
	close(stop)
	stall(DuplicateHold*d + gw3.cfg.Heartbeat)
	if testutil.ToFloat64(gw3.maint.dupGauge) != 0 || gw3.Status().DuplicateInstance != "" {
		t.Fatal("still quarantined after the duplicate went silent")
	}
	if v := testutil.ToFloat64(gw3.maint.dupTotal); v < 50 {
		t.Errorf("edge_election_duplicate_id_total = %v, want one per announcement (about 100)", v)
	}
	waitFor(t, 3*time.Second, "gw3 leads again (hold-down)", func() bool { return s.leader() == "gw3" })
}
