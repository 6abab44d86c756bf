package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// newRingSite starts n agents running the Ring algorithm over an in-memory
// network, so every ring message goes through Encode and Decode.
func newRingSite(t *testing.T, n int) *testSite {
	s := &testSite{t: t, net: NewMemNetwork(), agents: map[string]*Agent{}, cancel: map[string]context.CancelFunc{},
		done: map[string]chan error{}, rec: map[string]*recorder{}}
	var members []election.Member
	for i := 1; i <= n; i++ {
		members = append(members, election.Member{ID: fmt.Sprintf("gw%d", i), Priority: i})
	}
	for _, m := range members {
		cfg := Config{ID: m.ID, Group: "site", Members: members, Algorithm: AlgorithmRing,
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
	return s
}

// TestAgentRingFailover: five Ring agents elect the highest; then the leader
// and the member right after the new leader in the ring (gw1: the ring is
// ordered by rank, lowest first, and wraps from gw5 to gw1) are cut off at
// once. The three survivors still form a quorum and agree on gw4.
func TestAgentRingFailover(t *testing.T) { synctest.Test(t, testAgentRingFailover) }

func testAgentRingFailover(t *testing.T) {
	s := newRingSite(t, 5)
	all := []string{"gw1", "gw2", "gw3", "gw4", "gw5"}
	waitFor(t, 5*time.Second, "gw5 to lead", func() bool { return s.agreed(all...) == "gw5" })
	if st := s.agents["gw2"].Status(); st.Algorithm != AlgorithmRing {
		t.Fatalf("status algorithm %q", st.Algorithm)
	}
	term := s.agents["gw5"].Term()
	s.net.Isolate("gw5")
	s.net.Isolate("gw1")
	waitFor(t, 5*time.Second, "gw4 to lead", func() bool { return s.agreed("gw2", "gw3", "gw4") == "gw4" })
	if got := s.agents["gw4"].Term(); got <= term {
		t.Fatalf("new term %d not above %d", got, term)
	}
	s.net.Heal()
	waitFor(t, 5*time.Second, "one leader after heal", func() bool { return s.agreed(all...) != "" })
}
