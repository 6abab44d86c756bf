package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// witnessGauge reads edge_election_witness from a's registry, checking its
// group label.
func witnessGauge(t *testing.T, a *Agent) float64 {
	t.Helper()
	mfs, err := a.out.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "edge_election_witness" {
			continue
		}
		m := mf.GetMetric()[0]
		if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetName() != "group" || m.GetLabel()[0].GetValue() != a.cfg.Group {
			t.Errorf("edge_election_witness labels %v, want group=%s", m.GetLabel(), a.cfg.Group)
		}
		return m.GetGauge().GetValue()
	}
	t.Fatal("edge_election_witness is not registered")
	return 0
}

// TestAgentWitnessSite: two gateways and a witness ranked above both. The
// higher gateway leads; the witness reports itself and is reported as a
// witness, follower by role, with edge_election_witness 1; a transfer to
// it is refused; with the leader stopped the other gateway leads on the
// witness's vote.
func TestAgentWitnessSite(t *testing.T) { synctest.Test(t, testAgentWitnessSite) }

func testAgentWitnessSite(t *testing.T) {
	s := &testSite{t: t, net: NewMemNetwork(), agents: map[string]*Agent{}, cancel: map[string]context.CancelFunc{},
		done: map[string]chan error{}, rec: map[string]*recorder{}}
	members := []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "wit", Priority: 3}}
	for _, m := range members {
		cfg := Config{ID: m.ID, Group: "site", Members: members, Witnesses: []string{"wit"},
			Heartbeat: 50 * time.Millisecond, StateDir: t.TempDir(), HoldDown: time.Hour}
		a, err := New(cfg, WithTransport(s.net.Join(m.ID)), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		s.agents[m.ID], s.cancel[m.ID], s.done[m.ID] = a, cancel, done
	}
	t.Cleanup(func() {
		for id := range s.cancel {
			s.stop(id)
		}
	})
	waitFor(t, 5*time.Second, "gw2 to lead", func() bool { return s.agreed("gw1", "gw2", "wit") == "gw2" })
	for id, a := range s.agents {
		st := a.Status()
		if st.Witness != (id == "wit") {
			t.Errorf("%s: status witness=%v", id, st.Witness)
		}
		for _, m := range st.Members {
			if m.Witness != (m.ID == "wit") || m.Drained {
				t.Errorf("%s's status: member %s witness=%v drained=%v", id, m.ID, m.Witness, m.Drained)
			}
		}
		want := 0.0
		if id == "wit" {
			want = 1
			if st.Role != "follower" {
				t.Errorf("witness role %q, want follower", st.Role)
			}
		}
		if got := witnessGauge(t, a); got != want {
			t.Errorf("%s: edge_election_witness = %v, want %v", id, got, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.agents["gw2"].Transfer(ctx, "wit"); err == nil || !strings.Contains(err.Error(), "witness") {
		t.Fatalf("transfer to the witness: %v, want a refusal naming the witness", err)
	}
	if s.agreed("gw1", "gw2", "wit") != "gw2" {
		t.Fatal("a refused transfer changed the leader")
	}
	if err := s.stop("gw2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "gw1 to lead", func() bool { return s.agreed("gw1", "wit") == "gw1" })
	if s.agents["wit"].IsLeader() {
		t.Fatal("the witness leads")
	}
}

func TestAgentWitnessRefusesDuty(t *testing.T) {
	members := []election.Member{{ID: "gw1"}, {ID: "gw2"}, {ID: "wit"}}
	cfg := Config{ID: "wit", Group: "site", Members: members, Witnesses: []string{"wit"}, StateDir: t.TempDir()}
	_, err := New(cfg, WithTransport(NewMemNetwork().Join("wit")), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		WithDuty(NewDuty(DutyConfig{Command: []string{"true"}})))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q is a witness", "wit")) {
		t.Fatalf("New with a duty on a witness: %v, want a refusal", err)
	}
}
