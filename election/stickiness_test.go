package election

import "testing"

// TestBackingAgainEndsPreVote: a member released from its backing (the route
// to the candidate it voted for closed) asks for pre-votes; then the
// candidate's repeated COORDINATOR reaches it, it votes again, and so backs
// the candidate again, whose win may count that vote for its lease. The
// pre-vote it was running must end there: a grant arriving after it made
// the member stand in the next term at once, against the candidate it had
// just voted for, and both held a lease (the checker: Bully, three members,
// "n2 and n3 both hold a valid lease"; internal/safety TestFoundSeeds
// replays that run).
func TestBackingAgainEndsPreVote(t *testing.T) {
	members := []Member{{ID: "n1", Priority: 1}, {ID: "n2", Priority: 2}, {ID: "n3", Priority: 3}}
	cfg := testConfig("n2", members)
	n, err := NewBully(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range cfg.ElectionTicks {
		n.Tick() // a fresh member backs no one only after D
	}
	step := func(m Message) {
		t.Helper()
		if err := n.Step(m); err != nil {
			t.Fatal(err)
		}
	}
	step(Message{Type: MsgCoordinator, From: "n3", Term: 1, Seq: 1})
	if c := n.(*core); c.backed != "n3" || c.hs.Term != 1 {
		t.Fatalf("the member did not vote for n3 in term 1: backs %q in term %d", c.backed, c.hs.Term)
	}
	if !n.RouteLost("n3") {
		t.Fatal("the route loss did not release the member from n3")
	}
	if n.(*core).preVotes == nil {
		t.Fatal("released, the member did not ask for pre-votes: the test no longer covers the race")
	}
	step(Message{Type: MsgCoordinator, From: "n3", Term: 1, Seq: 2}) // the repeat: voted again
	step(Message{Type: MsgPreVoteReply, From: "n1", Term: 2, Granted: true})
	n.Ready()
	if st := n.Status(); st.Role != Follower || st.Term != 1 {
		t.Fatalf("after voting for n3 again the member is %v in term %d, want a follower in term 1", st.Role, st.Term)
	}
}
