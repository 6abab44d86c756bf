package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

func TestLeaderHistoryKeepsTheLastNewestFirst(t *testing.T) {
	var h leaderHistory
	if got := h.list(); got == nil || len(got) != 0 {
		t.Fatalf("empty history = %#v, want an empty non-nil slice (JSON [])", got)
	}
	for i := 1; i <= LeaderHistorySize+5; i++ {
		h.add(LeaderChangeRecord{Term: uint64(i), Leader: fmt.Sprintf("gw%d", i)})
	}
	got := h.list()
	if len(got) != LeaderHistorySize {
		t.Fatalf("kept %d records, want %d", len(got), LeaderHistorySize)
	}
	for i, r := range got {
		if want := uint64(LeaderHistorySize + 5 - i); r.Term != want {
			t.Fatalf("record %d has term %d, want %d (newest first): %+v", i, r.Term, want, got)
		}
	}
	got[0].Leader = "changed"
	if h.list()[0].Leader == "changed" {
		t.Fatal("list shares its records with the history")
	}
}

func TestChangeReason(t *testing.T) {
	won := []election.Event{{Kind: election.EventElectionWon}}
	down := []election.Event{{Kind: election.EventSteppedDown, Reason: election.ReasonLeaseExpired}}
	for _, tc := range []struct {
		self, prev, leader string
		events             []election.Event
		want               string
	}{
		{"gw1", "", "gw1", won, "this gateway won the election"},
		{"gw1", "gw1", "", down, "this gateway stepped down: " + election.ReasonLeaseExpired.String()},
		{"gw1", "gw2", "", nil, "gw2 is no longer leader"},
		{"gw1", "", "gw2", nil, "gw2 was elected"},
		{"gw1", "gw2", "gw3", nil, "gw3 took over from gw2"},
		// Another member's step-down event is not this gateway's.
		{"gw1", "gw2", "", down, "gw2 is no longer leader"},
	} {
		if got := changeReason(tc.self, tc.prev, tc.leader, tc.events); !strings.HasPrefix(got, tc.want) {
			t.Errorf("changeReason(%s, %q -> %q) = %q, want prefix %q", tc.self, tc.prev, tc.leader, got, tc.want)
		}
	}
}

// TestStatusReportsLeaderChanges: a transfer shows in every agent's status
// history, newest first, with the term and a reason, and the JSON keeps
// the contract's keys beside the new leader_changes.
func TestStatusReportsLeaderChanges(t *testing.T) { synctest.Test(t, testStatusReportsLeaderChanges) }

func testStatusReportsLeaderChanges(t *testing.T) {
	s := newTestSite(t, 3)
	waitFor(t, 5*time.Second, "gw3 to lead", func() bool { return s.agreed("gw1", "gw2", "gw3") == "gw3" })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.agents["gw3"].Transfer(ctx, "gw2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "gw2 to lead", func() bool { return s.agreed("gw1", "gw2", "gw3") == "gw2" })
	term := s.agents["gw2"].Term()
	waitFor(t, 2*time.Second, "gw1's history to name gw2", func() bool {
		h := s.agents["gw1"].Status().LeaderChanges
		return len(h) > 0 && h[0].Leader == "gw2"
	})
	h := s.agents["gw1"].Status().LeaderChanges
	if h[0].Term != term || h[0].Reason == "" || h[0].Time.IsZero() {
		t.Fatalf("newest change %+v, want gw2 in term %d with a reason and a time", h[0], term)
	}
	var sawGW3 bool
	for _, r := range h[1:] {
		sawGW3 = sawGW3 || r.Leader == "gw3"
	}
	if !sawGW3 {
		t.Fatalf("gw1's history %+v lacks the first leader gw3", h)
	}
	own := s.agents["gw2"].Status().LeaderChanges
	if own[0].Leader != "gw2" || own[0].Reason != "this gateway won the election" {
		t.Fatalf("gw2's newest change %+v, want its own election", own[0])
	}
	if d := s.agents["gw2"].Status().Duty; d != nil {
		t.Fatalf("duty %+v reported for an agent without a duty", d)
	}
	b, err := json.Marshal(s.agents["gw1"].Status())
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "group", "algorithm", "role", "leader", "term", "quorum", "members", "island_mode",
		"lease_remaining_ms", "nats_connected", "version", "time", "leader_changes"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("status JSON lacks %q: %s", k, b)
		}
	}
	if _, ok := keys["duty"]; ok {
		t.Errorf("status JSON has a duty without one: %s", b)
	}
}
