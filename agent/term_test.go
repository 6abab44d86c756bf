package agent

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// termSite runs gw2 and gw3 on an in-memory bus and lets the test speak as
// gw1, a member whose key was stolen.
type termSite struct {
	net    *MemNetwork
	agents map[string]*Agent
	forger *MemTransport
	h      time.Duration
}

func newTermSite(t *testing.T) *termSite {
	h := 50 * time.Millisecond
	s := &termSite{net: NewMemNetwork(), agents: map[string]*Agent{}, h: h}
	members := []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "gw3", Priority: 3}}
	s.forger = s.net.Join("gw1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	t.Cleanup(func() { cancel(); <-done; <-done })
	for _, id := range []string{"gw2", "gw3"} {
		cfg := Config{ID: id, Group: "site", Members: members, Heartbeat: h, StateDir: t.TempDir(), Preemption: PreemptNever}
		a, err := New(cfg, WithTransport(s.net.Join(id)), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		s.agents[id] = a
		go func() { _ = a.Run(ctx); done <- struct{}{} }()
	}
	return s
}

// agree waits until gw2 and gw3 report the same leader, not gw1, in a term
// above min, and returns it and the time it took.
func (s *termSite) agree(t *testing.T, min uint64, within time.Duration) (string, uint64, time.Duration) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		l2, l3 := s.agents["gw2"].Leader(), s.agents["gw3"].Leader()
		if l2 != "" && l2 != "gw1" && l2 == l3 && s.agents[l2].IsLeader() && s.agents[l2].Term() > min {
			return l2, s.agents[l2].Term(), time.Since(start)
		}
		stall(time.Millisecond)
	}
	t.Fatalf("gw2 and gw3 did not agree on a leader above term %d within %s (gw2: %q %d, gw3: %q %d)", min, within,
		s.agents["gw2"].Leader(), s.agents["gw2"].Term(), s.agents["gw3"].Leader(), s.agents["gw3"].Term())
	return "", 0, 0
}

func (s *termSite) bad(id, reason string) float64 {
	mfs, _ := s.agents[id].Registry().Gather()
	for _, mf := range mfs {
		if mf.GetName() != "edge_election_bad_messages_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestTermFarAboveTheAllowanceIsRefused: a stolen key's heartbeat of a
// term below the bound but far above what the group could have reached is
// refused by every member (term_jump); one a thousand terms up is taken,
// and once the forger falls silent the honest members elect within D.
func TestTermFarAboveTheAllowanceIsRefused(t *testing.T) {
	synctest.Test(t, testTermFarAboveTheAllowanceIsRefused)
}

func testTermFarAboveTheAllowanceIsRefused(t *testing.T) {
	s := newTermSite(t)
	_, term, _ := s.agree(t, 0, 10*time.Second)
	if err := s.forger.Send(election.Message{Type: election.MsgHeartbeat, From: "gw1", Term: election.MaxTerm - 1, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.bad("gw2", ReasonTermJump) < 1 || s.bad("gw3", ReasonTermJump) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the far term was not refused by both members")
		}
		stall(time.Millisecond)
	}
	for _, id := range []string{"gw2", "gw3"} {
		if got := s.agents[id].Term(); got != term {
			t.Fatalf("%s at term %d, want %d", id, got, term)
		}
	}
	if err := s.forger.Send(election.Message{Type: election.MsgHeartbeat, From: "gw1", Term: term + 1000, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	_, got, took := s.agree(t, term+1000, 10*time.Second)
	d := 3 * s.h
	if took > d+time.Second {
		t.Fatalf("elected in term %d after %s, want within D + 1 s", got, took)
	}
}

// TestHonestMembersPushedApartStillElect is the regression test of a bound
// on the distance from the member's own term: gw1's stolen key pushes gw2
// alone MaxTermJump ahead, twice, with messages only gw2 receives. With a
// distance bound, gw3 then refused every message of gw2 and gw2 every
// message of gw3 as stale, and the group never elected again. With the
// allowance, they elect within D + 1 s once the forger stops.
func TestHonestMembersPushedApartStillElect(t *testing.T) {
	synctest.Test(t, testHonestMembersPushedApartStillElect)
}

func testHonestMembersPushedApartStillElect(t *testing.T) {
	s := newTermSite(t)
	_, term, _ := s.agree(t, 0, 10*time.Second)
	// While gw2 and gw3 cannot hear each other (so gw3 does not follow gw2
	// up between the pushes), gw2 is pushed twice.
	s.net.Cut("gw2", "gw3")
	for i := uint64(1); i <= 2; i++ {
		own := s.agents["gw2"].Term()
		// An acknowledgement carrying a higher term: gw2 adopts it.
		if err := s.forger.Send(election.Message{Type: election.MsgAck, From: "gw1", To: "gw2", Term: own + MaxTermJump, Seq: 1}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for s.agents["gw2"].Term() < own+MaxTermJump {
			if time.Now().After(deadline) {
				t.Fatalf("gw2 did not take term %d (at %d)", own+MaxTermJump, s.agents["gw2"].Term())
			}
			stall(time.Millisecond)
		}
	}
	if gap := s.agents["gw2"].Term() - s.agents["gw3"].Term(); gap < 2*MaxTermJump-1 {
		t.Fatalf("gw2 only %d terms ahead of gw3", gap)
	}
	s.net.Heal()
	_, got, took := s.agree(t, term+2*MaxTermJump-1, 10*time.Second)
	if took > 3*s.h+time.Second {
		t.Fatalf("elected in term %d after %s, want within D + 1 s", got, took)
	}
}

// TestBackoffNeverExceedsD: however many elections failed, a member stands
// again within D, so that once whatever made them fail stops (a hostile
// member included), the group elects within D and an election.
func TestBackoffNeverExceedsD(t *testing.T) {
	for _, h := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second} {
		for _, k := range []int{3, 5, 10} {
			d := time.Duration(k) * h
			b := newTickBackoff(h, h/TicksPerHeartbeat, d)
			for i := 0; i < 200; i++ {
				if n := b.Next(); time.Duration(n)*(h/TicksPerHeartbeat) > d {
					t.Fatalf("H=%s k=%d: backoff %d ticks, over D=%s", h, k, n, d)
				}
			}
		}
	}
}
