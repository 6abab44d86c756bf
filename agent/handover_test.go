package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// resignSpy passes messages through to a transport and records, at the
// moment each RESIGN is handed to the transport, whether its agent still
// reported itself leader. RESIGN lifts the members' stickiness: the
// successor can be elected as soon as it arrives, so the resigning agent
// must have stopped leading (IsLeader false, duty context cancelled)
// before it leaves.
//
// After a RESIGN it also stalls the sender for a while, as a busy machine
// would deschedule the process, and records whether another agent started
// leading while this one still reported itself leader: two valid leases.
type resignSpy struct {
	Transport
	agent  atomic.Pointer[Agent]
	others func() []*Agent

	mu      sync.Mutex
	resigns []bool // IsLeader() when each RESIGN was sent
	overlap bool
}

func (s *resignSpy) Send(m election.Message) error {
	if m.Type != election.MsgResign {
		return s.Transport.Send(m)
	}
	self := s.agent.Load()
	leading := self.IsLeader()
	err := s.Transport.Send(m)
	overlap := false
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end) && !overlap; stall(time.Millisecond) {
		for _, o := range s.others() {
			if o != self && o.IsLeader() && self.IsLeader() {
				overlap = true
			}
		}
	}
	s.mu.Lock()
	s.resigns = append(s.resigns, leading)
	s.overlap = s.overlap || overlap
	s.mu.Unlock()
	return err
}

func (s *resignSpy) sent() ([]bool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bool(nil), s.resigns...), s.overlap
}

type spiedAgent struct {
	a      *Agent
	spy    *resignSpy
	cancel context.CancelFunc
	done   chan error
}

func startSpied(t *testing.T, net *MemNetwork, id string, members []election.Member, holdDown time.Duration, others func() []*Agent) *spiedAgent {
	t.Helper()
	spy := &resignSpy{Transport: net.Join(id), others: others}
	cfg := Config{ID: id, Group: "site", Members: members, Heartbeat: 50 * time.Millisecond,
		StateDir: t.TempDir(), HoldDown: holdDown}
	a, err := New(cfg, WithTransport(spy), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	spy.agent.Store(a)
	ctx, cancel := context.WithCancel(context.Background())
	s := &spiedAgent{a: a, spy: spy, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-s.done })
	return s
}

// TestHandoverStopsLeadingBeforeRESIGNLeaves covers every way a leader
// hands over: Resign, Transfer, a graceful stop (SIGTERM) and a hold-down
// preemption by a returning higher-ranked member. In each, the leader must
// report not-leader before its RESIGN reaches the transport.
func TestHandoverStopsLeadingBeforeRESIGNLeaves(t *testing.T) {
	members := []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "gw3", Priority: 3}}
	leaderOf := func(as []*Agent) *Agent {
		for _, a := range as {
			if a.IsLeader() {
				return a
			}
		}
		return nil
	}
	for _, how := range []string{"resign", "transfer", "stop", "preemption"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := NewMemNetwork()
				var mu sync.Mutex
				as := map[string]*spiedAgent{}
				all := func() []*Agent {
					mu.Lock()
					defer mu.Unlock()
					var r []*Agent
					for _, s := range as {
						r = append(r, s.a)
					}
					return r
				}
				ids := []string{"gw1", "gw2", "gw3"}
				if how == "preemption" {
					ids = ids[:2] // gw3 joins later and takes over after the hold-down
				}
				for _, id := range ids {
					s := startSpied(t, net, id, members, 100*time.Millisecond, all)
					mu.Lock()
					as[id] = s
					mu.Unlock()
				}
				waitFor(t, 5*time.Second, "a leader", func() bool { return leaderOf(all()) != nil })
				leader := leaderOf(all())
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				switch how {
				case "resign":
					if err := leader.Resign(ctx); err != nil {
						t.Fatal(err)
					}
				case "transfer":
					to := "gw1"
					if leader.cfg.ID == "gw1" {
						to = "gw2"
					}
					if err := leader.Transfer(ctx, to); err != nil {
						t.Fatal(err)
					}
				case "stop":
					s := as[leader.cfg.ID]
					s.cancel()
					if err := <-s.done; err != nil {
						t.Fatal(err)
					}
					s.done <- nil // for Cleanup
				case "preemption":
					s := startSpied(t, net, "gw3", members, 100*time.Millisecond, all)
					mu.Lock()
					as["gw3"] = s
					mu.Unlock()
					waitFor(t, 5*time.Second, "gw3 to take over", s.a.IsLeader)
				}
				spy := as[leader.cfg.ID].spy
				waitFor(t, 5*time.Second, "the RESIGN", func() bool { r, _ := spy.sent(); return len(r) > 0 })
				resigns, overlap := spy.sent()
				for i, leading := range resigns {
					if leading {
						t.Errorf("RESIGN %d left %s while it still reported itself leader", i, leader.cfg.ID)
					}
				}
				if overlap {
					t.Errorf("while %s was stalled right after its RESIGN, a successor led and %s still reported itself leader: two valid leases", leader.cfg.ID, leader.cfg.ID)
				}
			})
		})
	}
}

// TestTransferWhoseWorkDidNotStopSaysSo: a leader whose work is still
// running when its release wait ends stops leading but withholds the
// handover (the members elect once they miss its heartbeats); Transfer then
// says so instead of reporting a handover that was never announced.
func TestTransferWhoseWorkDidNotStopSaysSo(t *testing.T) {
	synctest.Test(t, testTransferWhoseWorkDidNotStopSaysSo)
}

func testTransferWhoseWorkDidNotStopSaysSo(t *testing.T) {
	stuck := make(chan struct{}) // the leader's work ignores its context until the test ends
	_, agents, stop := runSite(t, 3, 100*time.Millisecond, siteSetup{opts: func(string) []Option {
		return []Option{WithReleaseWait(30 * time.Millisecond), WithCallbacks(Callbacks{
			OnStartedLeading: func(context.Context, uint64) { <-stuck },
		})}
	}})
	defer stop()
	defer close(stuck)
	ids := []string{"gw1", "gw2", "gw3"}
	waitFor(t, 5*time.Second, "a leader", func() bool { return agreedLeader(agents, ids...) != "" })
	leader := agents[agreedLeader(agents, ids...)]
	to := "gw1"
	if leader.cfg.ID == to {
		to = "gw2"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := leader.Transfer(ctx, to)
	if !errors.Is(err, ErrHandoverNotAnnounced) {
		t.Fatalf("Transfer = %v, want ErrHandoverNotAnnounced", err)
	}
	if leader.IsLeader() {
		t.Fatal("the leader still leads after a withheld handover")
	}
	if agents[to].IsLeader() {
		t.Fatalf("%s leads at once although the handover to it was never announced", to)
	}
}

// TestDutyResignOfAnEarlierTermIsIgnored: the duty resigns from a goroutine
// of its own (after a deadline kill, or repeated failures), so its request
// may reach the loop after the leadership it was made for ended and a new
// one began on the same agent. It must not hand that one over.
func TestDutyResignOfAnEarlierTermIsIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestSite(t, 3)
		waitFor(t, 5*time.Second, "gw3 to lead", func() bool { return s.agreed("gw1", "gw2", "gw3") == "gw3" })
		// gw3 leads a second time: over to gw2, and back.
		for _, to := range []string{"gw2", "gw3"} {
			from := s.agreed("gw1", "gw2", "gw3")
			if err := s.agents[from].Transfer(context.Background(), to); err != nil {
				t.Fatalf("transfer from %s to %s: %v", from, to, err)
			}
			waitFor(t, 5*time.Second, to+" to lead", func() bool { return s.agreed("gw1", "gw2", "gw3") == to })
		}
		a := s.agents["gw3"]
		term := a.Term()
		if err := (dutyLease{a}).Resign(term - 1); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("resign of term %d while leading %d: %v, want ErrNotLeader", term-1, term, err)
		}
		if !a.IsLeader() || a.Term() != term {
			t.Fatalf("after a resign of term %d: gw3 leads=%v in term %d, want term %d kept", term-1, a.IsLeader(), a.Term(), term)
		}
		if err := (dutyLease{a}).Resign(term); err != nil {
			t.Fatalf("resign of its own term %d: %v", term, err)
		}
		if a.IsLeader() {
			t.Fatalf("gw3 still leads after the resign of its term %d", term)
		}
	})
}
