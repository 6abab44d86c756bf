package opsclient

import (
	"bytes"
	"strings"
	"testing"

	"github.com/edge-agent/edge-agent/agent"
)

// witnessReports is a two-gateway site with a witness, as status answers.
func witnessReports(drained ...string) []agent.StatusReport {
	members := []agent.MemberReport{{ID: "gw1", Priority: 2, Alive: true}, {ID: "gw2", Priority: 1, Alive: true},
		{ID: "wit", Priority: 3, Alive: true, Witness: true}}
	var out []agent.StatusReport
	for _, m := range members {
		r := agent.StatusReport{ID: m.ID, Role: "follower", Leader: "gw1", Term: 4, Members: members,
			Quorum: agent.QuorumReport{Size: 2, Live: 3, OK: true}, Witness: m.Witness, Preemption: "hold-down", HoldDownMS: 1000}
		if m.ID == "gw1" {
			r.Role = "leader"
		}
		for _, d := range drained {
			r.Drained = r.Drained || d == m.ID
		}
		out = append(out, r)
	}
	return out
}

func TestStatusTableShowsWitness(t *testing.T) {
	var b bytes.Buffer
	printStatusTable(&b, "site", witnessReports())
	for _, l := range strings.Split(b.String(), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		want := map[string]string{"gw1": "leader", "gw2": "follower", "wit": "witness"}[f[0]]
		if want != "" && f[1] != want {
			t.Errorf("row %q: ROLE %q, want %q", l, f[1], want)
		}
	}
}

// TestWitnessLeftOutOfDrainAndPreemption: a witness counts neither as an
// undrained member (both gateways drained: the group has no leader) nor as
// a member preemption hands leadership to.
func TestWitnessLeftOutOfDrainAndPreemption(t *testing.T) {
	if !allDrainedBut(witnessReports("gw1", "gw2"), "") {
		t.Error("both gateways drained: not reported as every member drained")
	}
	if allDrainedBut(witnessReports("gw1"), "") {
		t.Error("one gateway drained: reported as every member drained")
	}
	reports := witnessReports()
	// gw1 resigns: gw2 leads, and the witness, ranked above both, is not
	// named as the member preemption hands leadership back to.
	note := preemptionNote(reports[0], reports, "")
	if strings.Contains(note, "wit") || !strings.Contains(note, "gw1 (the leader until now)") {
		t.Errorf("preemption note after gw1 resigns: %q", note)
	}
}
