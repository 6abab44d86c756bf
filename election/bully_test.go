package election

import "testing"

// TestBullyBackingOffMemberDoesNotAnswerOK: an OK tells a lower-ranked
// member to wait for the answerer's COORDINATOR. A member in election backoff
// (it just failed an election, or lost its lease) will not stand before the
// backoff ends, up to 30 heartbeats in the agent, so it must stay silent
// and let the asker stand: otherwise the asker waits, backs off in turn, and
// the group stays leaderless for the whole backoff.
func TestBullyBackingOffMemberDoesNotAnswerOK(t *testing.T) {
	members := []Member{{ID: "n1", Priority: 1}, {ID: "n2", Priority: 2}, {ID: "n3", Priority: 3}}
	cfg := testConfig("n3", members)
	cfg.Backoff = &fixedBackoff{Base: 100, Max: 300}
	n, err := NewBully(cfg)
	if err != nil {
		t.Fatal(err)
	}
	answersOK := func() bool {
		_ = n.Step(Message{Type: MsgElection, From: "n1", To: "n3"})
		for _, m := range n.Ready().Messages {
			if m.Type == MsgOK {
				return true
			}
		}
		return false
	}
	if !answersOK() {
		t.Fatal("a member that is not backing off must answer OK")
	}
	// n3 stands after its start-up wait, gets no votes, and backs off.
	failed := false
	for i := 0; i < cfg.ElectionTicks+3*cfg.AnswerTicks && !failed; i++ {
		n.Tick()
		for _, ev := range n.Ready().Events {
			failed = failed || ev.Kind == EventElectionFailed
		}
	}
	if !failed {
		t.Fatalf("n3 did not fail its lone election: %+v", n.Status())
	}
	if answersOK() {
		t.Fatal("a member in election backoff answered OK: the asker would wait for a COORDINATOR that cannot come")
	}
}
