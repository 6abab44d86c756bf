package agent

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edge-agent/edge-agent/election"
)

func TestMessageAlgorithm(t *testing.T) {
	for typ, want := range map[election.MsgType]string{
		election.MsgElection: AlgorithmBully, election.MsgOK: AlgorithmBully,
		election.MsgRingToken: AlgorithmRing, election.MsgRingAck: AlgorithmRing,
		election.MsgHeartbeat: "", election.MsgAck: "", election.MsgCoordinator: "",
		election.MsgVote: "", election.MsgResign: "", election.MsgWithdraw: "",
	} {
		if got := MessageAlgorithm(typ); got != want {
			t.Errorf("MessageAlgorithm(%v) = %q, want %q", typ, got, want)
		}
	}
}

func TestAlgorithmGuardRefusesOtherAlgorithm(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := newAlgorithmGuard(AlgorithmBully, groupSeries{NewMetricFamilies(reg), "site"})
	now := time.Unix(1000, 0)
	// Shared and own traffic passes.
	for _, m := range []election.Message{
		{Type: election.MsgHeartbeat, From: "b", Term: 1, Seq: 1},
		{Type: election.MsgElection, From: "b"},
		{Type: election.MsgCoordinator, From: "c", Term: 2, Seq: 1},
	} {
		if first, err := g.check(m, now); err != nil || first {
			t.Fatalf("%v refused: %v", m.Type, err)
		}
	}
	// A ring token reveals c; from then on every message of c is refused.
	first, err := g.check(election.Message{Type: election.MsgRingToken, From: "c", To: "a", Seq: 1, Initiator: "c", Participants: []string{"c"}}, now)
	var me *AlgorithmMismatchError
	if !first || !errors.As(err, &me) || me.Member != "c" || me.Algorithm != AlgorithmRing || me.Ours != AlgorithmBully {
		t.Fatalf("ring token: first=%v err=%v", first, err)
	}
	if !strings.Contains(err.Error(), "member c runs the ring algorithm") {
		t.Errorf("error text %q", err)
	}
	first, err = g.check(election.Message{Type: election.MsgCoordinator, From: "c", Term: 3, Seq: 1}, now.Add(time.Second))
	if first || err == nil {
		t.Fatalf("coordinator of a refused member: first=%v err=%v", first, err)
	}
	if _, err := g.check(election.Message{Type: election.MsgHeartbeat, From: "b", Term: 1, Seq: 2}, now); err != nil {
		t.Fatalf("other members are not refused: %v", err)
	}
	if got := testutil.ToFloat64(g.gauge); got != 1 {
		t.Fatalf("gauge = %v, want 1", got)
	}
	if ms := g.mismatches(now); len(ms) != 1 || ms[0].Member != "c" || ms[0].Algorithm != AlgorithmRing {
		t.Fatalf("mismatches = %+v", ms)
	}
	// Reconfigured, c sends shared traffic only; the refusal ends.
	later := now.Add(AlgorithmRefusal)
	if _, err := g.check(election.Message{Type: election.MsgCoordinator, From: "c", Term: 4, Seq: 1}, later); err != nil {
		t.Fatalf("after the refusal period: %v", err)
	}
	if got := testutil.ToFloat64(g.gauge); got != 0 {
		t.Fatalf("gauge = %v after expiry", got)
	}
}
