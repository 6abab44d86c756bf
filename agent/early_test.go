package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// gatedStore keeps the state in memory. A save of this member's vote for
// itself (a candidacy) waits until the gate opens, as a slow disk would;
// every save is reported on saved.
type gatedStore struct {
	self  string
	gate  chan struct{} // closed: candidacies persist at once
	saved chan election.HardState

	mu sync.Mutex
	hs election.HardState
}

func (s *gatedStore) Load() election.HardState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hs
}

func (s *gatedStore) Save(hs election.HardState) error {
	if hs.VotedFor == s.self {
		<-s.gate
	}
	s.mu.Lock()
	s.hs = hs
	s.mu.Unlock()
	select {
	case s.saved <- hs:
	default:
	}
	return nil
}

func (s *gatedStore) Close() error { return nil }

// gatedSite runs gw1..gw3 (H = 50 ms, so D = 150 ms and the answer timeout
// 50 ms) on an in-memory network, each on a gatedStore; gw3's gate starts
// closed. It returns the stores, the agents and a function that opens gw3's
// gate (at most once; the cleanup opens it too, so that a save held there
// does not keep gw3's Run from returning).
func gatedSite(t *testing.T) (map[string]*gatedStore, map[string]*Agent, func()) {
	net := NewMemNetwork()
	var members []election.Member
	for i := 1; i <= 3; i++ {
		members = append(members, election.Member{ID: fmt.Sprintf("gw%d", i), Priority: i})
	}
	stores := map[string]*gatedStore{}
	agents := map[string]*Agent{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, m := range members {
		st := &gatedStore{self: m.ID, gate: make(chan struct{}), saved: make(chan election.HardState, 64)}
		if m.ID != "gw3" {
			close(st.gate)
		}
		cfg := Config{ID: m.ID, Group: "site", Members: members, Heartbeat: 50 * time.Millisecond, HoldDown: time.Hour, StateDir: t.TempDir()}
		a, err := New(cfg, WithStore(st), WithTransport(net.Join(m.ID)), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		stores[m.ID], agents[m.ID] = st, a
		wg.Go(func() { _ = a.Run(ctx) })
	}
	var open sync.Once
	openGate := func() { open.Do(func() { close(stores["gw3"].gate) }) }
	t.Cleanup(func() {
		cancel()
		openGate()
		wg.Wait()
	})
	return stores, agents, openGate
}

// TestCandidateCallsForVotesBeforeItsPersist: a candidate's COORDINATOR
// leaves before its own term and vote are on disk (election.Ready.Early), so
// its voters persist their votes while its own fsync runs. gw3's save of its
// candidacy is held; gw1 and gw2 must still vote for it meanwhile, and gw3
// leads once its save completes. Sent after the save, the COORDINATOR would
// reach nobody while it is held.
func TestCandidateCallsForVotesBeforeItsPersist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stores, agents, openGate := gatedSite(t)
		// gw3, the highest, stands first; its save now waits at the gate.
		votedFor := func(id string) bool {
			for {
				select {
				case hs := <-stores[id].saved:
					if hs.VotedFor == "gw3" {
						return true
					}
				case <-time.After(5 * time.Second):
					return false
				}
			}
		}
		for _, id := range []string{"gw1", "gw2"} {
			if !votedFor(id) {
				t.Fatalf("%s persisted no vote for gw3 while gw3's own save was held: its call for votes waited for its fsync", id)
			}
		}
		if agents["gw3"].IsLeader() {
			t.Fatal("gw3 leads before its own vote is persisted")
		}
		openGate()
		waitFor(t, 5*time.Second, "gw3 leads", func() bool {
			return agents["gw3"].IsLeader() && agents["gw1"].Leader() == "gw3" && agents["gw2"].Leader() == "gw3"
		})
		if hs := stores["gw3"].Load(); hs.VotedFor != "gw3" || hs.Term != agents["gw3"].Term() {
			t.Fatalf("gw3 leads term %d with %+v persisted", agents["gw3"].Term(), hs)
		}
	})
}
