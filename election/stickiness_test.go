package election

import (
	"fmt"
	"testing"
)

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
	n, _ := settledBully(t, "n2", 3)
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

// TestRepeatOfLosingCandidacyKeepsBacking: n1 voted for the candidate n4 in
// term 1; n5 won term 1 without n1 and n1 acknowledged n5's heartbeat, which
// n5's lease counts. A repeat (or duplicate) of n4's COORDINATOR of term 1
// must not take n1 from n5: it made n1 back n4, which n4's next request, or
// its WITHDRAW of the lost candidacy, then turned into a vote within D of
// the acknowledgement. And a member restarted with a stored vote for n4
// backs an unknown leader for D (it may have acknowledged the winner just
// before it went down): a repeat ended that wait.
func TestRepeatOfLosingCandidacyKeepsBacking(t *testing.T) {
	backingN5 := func(t *testing.T) Node {
		n, _ := settledBully(t, "n1", 5)
		mustStep(t, n, Message{Type: MsgCoordinator, From: "n4", Term: 1, Seq: 1})
		if g := granted(n); len(g) != 1 {
			t.Fatalf("n1 did not vote for n4 in term 1: %+v", g)
		}
		n.Tick()
		mustStep(t, n, Message{Type: MsgHeartbeat, From: "n5", Term: 1, Seq: 3, Conn: "c5", Alive: []string{"n1", "n2", "n3", "n4", "n5"}})
		n.Ready()
		n.Tick()
		mustStep(t, n, Message{Type: MsgCoordinator, From: "n4", Term: 1, Seq: 1}) // the repeat
		if g := granted(n); len(g) > 0 {
			t.Errorf("backing n5, n1 granted n4's repeat of term 1 again: %+v", g)
		}
		if c := n.(*core); c.backed != "n5" {
			t.Fatalf("after n4's repeat n1 backs %q, want n5", c.backed)
		}
		n.Tick()
		return n
	}
	t.Run("next request", func(t *testing.T) {
		n := backingN5(t)
		mustStep(t, n, Message{Type: MsgCoordinator, From: "n4", Term: 2, Seq: 5})
		if g := granted(n); len(g) > 0 {
			t.Errorf("two ticks after acknowledging n5's heartbeat of term 1, n1 granted n4 a vote: %+v", g)
		}
	})
	t.Run("withdraw", func(t *testing.T) {
		n := backingN5(t)
		mustStep(t, n, Message{Type: MsgWithdraw, From: "n4", Term: 1})
		mustStep(t, n, Message{Type: MsgCoordinator, From: "n3", Term: 2, Seq: 7})
		if g := granted(n); len(g) > 0 {
			t.Errorf("two ticks after acknowledging n5's heartbeat of term 1, n1 granted n3 a vote: %+v", g)
		}
	})
	t.Run("restart", func(t *testing.T) {
		_, members := settledBully(t, "n1", 5)
		cfg := testConfig("n1", members)
		cfg.HardState = HardState{Term: 1, VotedFor: "n4"}
		n, err := NewBully(cfg)
		if err != nil {
			t.Fatal(err)
		}
		n.Tick()
		mustStep(t, n, Message{Type: MsgCoordinator, From: "n4", Term: 1, Seq: 9})
		n.Ready()
		n.Tick()
		mustStep(t, n, Message{Type: MsgCoordinator, From: "n4", Term: 2, Seq: 1})
		if g := granted(n); len(g) > 0 {
			t.Errorf("2 ticks after its start (start wait %d ticks) the member granted a vote: %+v", cfg.ElectionTicks, g)
		}
	})
}

// settledBully returns a Bully core of member self among n1..nN (ranked in
// that order) that has run D since its start, so backs no one, and its
// members.
func settledBully(t *testing.T, self string, n int) (Node, []Member) {
	t.Helper()
	var members []Member
	for i := range n {
		members = append(members, Member{ID: fmt.Sprintf("n%d", i+1), Priority: i + 1})
	}
	cfg := testConfig(self, members)
	node, err := NewBully(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range cfg.ElectionTicks {
		node.Tick() // a fresh member backs no one only after D
	}
	return node, members
}

func mustStep(t *testing.T, n Node, m Message) {
	t.Helper()
	if err := n.Step(m); err != nil {
		t.Fatal(err)
	}
}

// TestStaleRequestDoesNotPushOutKeptRequest: backing a live leader, a member
// keeps a request for the next term to grant when that leader goes silent. A
// request of its own term (a stale repeat of a losing candidacy, here from a
// higher-ranked member) can never be granted later, and must not take the
// kept request's place: it did, and the next-term request was lost, its
// candidate waiting a whole answer timeout more.
func TestStaleRequestDoesNotPushOutKeptRequest(t *testing.T) {
	n, members := settledBully(t, "n1", 5)
	cfg := testConfig("n1", members)
	mustStep(t, n, Message{Type: MsgCoordinator, From: "n4", Term: 1, Seq: 1}) // n1 votes n4 in term 1
	n.Ready()
	mustStep(t, n, Message{Type: MsgHeartbeat, From: "n3", Term: 1, Seq: 2, Conn: "c3", Alive: []string{"n1", "n2", "n3", "n4", "n5"}})
	n.Ready() // n3 won term 1 without n1; n1 backs n3
	for range cfg.ElectionTicks - 2 {
		n.Tick() // n3's heartbeats stop
	}
	mustStep(t, n, Message{Type: MsgCoordinator, From: "n2", Term: 2, Seq: 1})
	mustStep(t, n, Message{Type: MsgCoordinator, From: "n4", Term: 1, Seq: 2}) // a stale repeat
	if g := granted(n); len(g) > 0 {
		t.Fatalf("backing n3, n1 granted %+v", g)
	}
	for range 3 {
		n.Tick() // n3 silent for D: the kept request is granted
	}
	if g := granted(n); len(g) != 1 || g[0].To != "n2" || g[0].Term != 2 {
		t.Fatalf("once n3 went silent n1 granted %+v, want its vote for n2's kept request of term 2", g)
	}
}

func granted(n Node) []Message {
	var out []Message
	for _, m := range n.Ready().Messages {
		if m.Type == MsgVote && m.Granted {
			out = append(out, m)
		}
	}
	return out
}
