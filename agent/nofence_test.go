package agent

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edge-agent/edge-agent/election"
	"github.com/edge-agent/edge-agent/internal/poll"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestNoFenceForALeaderWithoutWork: a leader built WithNoLeaderWork says so
// in its heartbeats, and a member that acts on the server's report of its
// closed connection leads without the fast path's fence; a leader with
// leader work (or that says nothing) keeps its successor fenced, and so
// does an operator who raised the fence, on either side.
func TestNoFenceForALeaderWithoutWork(t *testing.T) {
	const raised = 50 * time.Millisecond // above the default fence (one tick, 10 ms)
	for _, c := range []struct {
		name         string
		noWork       bool          // the leader, gw3, is built WithNoLeaderWork
		leaderFence  time.Duration // gw3's fast_failover_fence (0: the default)
		membersFence time.Duration // gw1's and gw2's
		wantFence    time.Duration // how long gw2 waits after the report
	}{
		{name: "no leader work", noWork: true, wantFence: 0},
		{name: "leader work", noWork: false, wantFence: 10 * time.Millisecond},
		{name: "members raised the fence", noWork: true, membersFence: raised, wantFence: raised},
		{name: "leader raised the fence", noWork: true, leaderFence: raised, wantFence: 10 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newFastSite(t, 3, nil)
				for _, m := range s.members[:2] {
					cfg := s.cfg(m.ID)
					cfg.Fence = c.membersFence
					s.start(m.ID, cfg)
				}
				cfg := s.cfg("gw3")
				cfg.Fence = c.leaderFence
				var opts []Option
				if c.noWork {
					opts = append(opts, WithNoLeaderWork())
				}
				gw3 := s.start("gw3", cfg, opts...)
				waitFor(t, 5*time.Second, "gw3 to lead", func() bool {
					return gw3.IsLeader() && s.agents["gw1"].Leader() == "gw3" && s.agents["gw2"].Leader() == "gw3"
				})
				stall(300 * time.Millisecond) // heartbeats announcing gw3's connection reach both members
				term := gw3.Term()
				start := time.Now()
				s.net.Disconnect("gw3")
				var took time.Duration
				if err := poll.Every(100*time.Microsecond, 5*time.Second, "gw2 to lead", func() (bool, string) {
					took = time.Since(start)
					return s.agents["gw2"].IsLeader() && s.agents["gw2"].Term() > term, ""
				}); err != nil {
					t.Fatal(err)
				}
				if v := testutil.ToFloat64(s.agents["gw2"].m.fastSuspicions); v < 1 {
					t.Fatalf("gw2 counted %v fast suspicions: it did not act on the report", v)
				}
				// The election itself takes no virtual time here (an
				// in-memory bus and no timer on its path): what gw2 waited
				// is the fence.
				if c.wantFence == 0 && took >= time.Millisecond {
					t.Fatalf("gw2 led %s after the report of a leader without work: it waited a fence", took)
				}
				if c.wantFence > 0 && (took < c.wantFence || took >= c.wantFence+time.Millisecond) {
					t.Fatalf("gw2 led %s after the report, want the fence of %s", took, c.wantFence)
				}
			})
		})
	}
}

// TestNoLeaderWorkRefusesLeaderWork: WithNoLeaderWork is a declaration that
// nothing acts on the leadership but through IsLeader; New refuses it
// beside an OnStartedLeading callback or a duty.
func TestNoLeaderWorkRefusesLeaderWork(t *testing.T) {
	cfg := Config{ID: "gw1", Group: "g", Members: []election.Member{{ID: "gw1", Priority: 1}}, Heartbeat: 100 * time.Millisecond, StateDir: t.TempDir()}
	for name, opt := range map[string]Option{
		"callback": WithCallbacks(Callbacks{OnStartedLeading: func(context.Context, uint64) {}}),
		"duty":     WithDuty(NewDuty(DutyConfig{Command: []string{"true"}})),
	} {
		_, err := New(cfg, WithNoLeaderWork(), opt)
		if err == nil || !strings.Contains(err.Error(), "WithNoLeaderWork") {
			t.Errorf("%s: New gave %v, want a refusal naming WithNoLeaderWork", name, err)
		}
	}
	a, err := New(cfg, WithNoLeaderWork())
	if err != nil {
		t.Fatal(err)
	}
	if !a.fast.noFence {
		t.Error("an agent without leader work does not say nofence")
	}
	a.store.Close()
}

// TestStampNoFenceNeedsAConnection: NoFence is about the connection a
// heartbeat names; a bus that names none (no fast path) sends no claim.
func TestStampNoFenceNeedsAConnection(t *testing.T) {
	hb := election.Message{Type: election.MsgHeartbeat, From: "gw1", Term: 2, Seq: 1, NoFence: true}
	if m := Stamp(hb, "bully", nil); m.NoFence {
		t.Errorf("stamped without a connection: %+v", m)
	}
	if m := Stamp(hb, "bully", func(uint64) string { return "" }); m.NoFence {
		t.Errorf("stamped with no connection announced: %+v", m)
	}
	if m := Stamp(hb, "bully", func(uint64) string { return "S/1" }); !m.NoFence || m.Conn != "S/1" {
		t.Errorf("stamped with a connection: %+v", m)
	}
}
