package election

import "testing"

// TestWithdrawFreesMemberThatTookAnnouncementForLeader: a candidate that
// announced itself (its first heartbeat) and was overtaken by a higher term
// before a quorum acknowledged it never led in that term, and its WITHDRAW
// must free the members that acknowledged the announcement. They took it for
// a leader's heartbeat and ignored the WITHDRAW, so they kept back every
// other member's pre-vote and Ring token for D. The checker found a Ring of
// five (answer timeouts 6 to 54 ticks) where that hold outlasted a voter's
// wait for the round it voted in: the voter voted in a lower member's round
// in a higher term, its acknowledgement of the winner's announcement
// deposed it, and so on every 59 ticks for ever (TestFoundSeeds replays it).
func TestWithdrawFreesMemberThatTookAnnouncementForLeader(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		members := []Member{{ID: "n1", Priority: 1}, {ID: "n2", Priority: 2}, {ID: "n3", Priority: 3}}
		n, err := newNode(testConfig("n2", members))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []Message{
			{Type: MsgHeartbeat, From: "n3", Term: 1, Seq: 1}, // the announcement
			{Type: MsgWithdraw, From: "n3", Term: 1},
		} {
			if err := n.Step(m); err != nil {
				t.Fatal(err)
			}
		}
		n.Ready()
		if st := n.Status(); st.Leader != "" {
			t.Errorf("after the WITHDRAW this member still names %q its leader", st.Leader)
		}
		if err := n.Step(Message{Type: MsgPreVote, From: "n1", Term: 2, Seq: 7}); err != nil {
			t.Fatal(err)
		}
		for _, m := range n.Ready().Messages {
			if m.Type == MsgPreVoteReply && m.To == "n1" && m.Term == 2 && m.Granted {
				return
			}
		}
		t.Fatal("the WITHDRAW did not free the member: it kept n1's pre-vote back")
	})
}
