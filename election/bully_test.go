package election

import (
	"fmt"
	"testing"
)

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

// TestBullyRefusingMemberKeepsItsWait: a member that refuses a lower
// member's COORDINATOR and is already waiting for a higher one to stand
// keeps that wait's deadline. Found by the checker's swarm runs (seeds in
// internal/safety's TestFoundSeeds): with the highest member drained and
// unaware of it, n3 waited for n4 to stand; n1 and n2 stood in turn, a few
// ticks apart, each refused by n3, and each refusal started n3's wait over,
// so n3 never gave up on n4 and stood itself; every member was up, every
// link whole, and the site had no leader for ever.
func TestBullyRefusingMemberKeepsItsWait(t *testing.T) {
	members := []Member{{ID: "n1", Priority: 1}, {ID: "n2", Priority: 2}, {ID: "n3", Priority: 3}, {ID: "n4", Priority: 4}}
	cfg := testConfig("n3", members)
	n, err := NewBully(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// n3 hears no leader: after its start-up wait it tells n4, the highest
	// member in its view, that it would vote for it, and waits for n4's
	// COORDINATOR.
	waiting := -1
	for i := 0; i < 3*cfg.ElectionTicks && waiting < 0; i++ {
		n.Tick()
		for _, m := range n.Ready().Messages {
			if m.Type == MsgPreVoteReply && m.To == "n4" && m.Granted {
				waiting = i
			}
		}
	}
	if waiting < 0 {
		t.Fatalf("n3 never waited for n4: %+v", n.Status())
	}
	// n4 never stands. n1 and n2 stand in turn every 4 ticks; n3 refuses
	// each. Within its answer window n3 must still give up on n4 and go on
	// with the election (an ELECTION to n4).
	from := []string{"n1", "n2"}
	for i := 1; i <= cfg.AnswerTicks+1; i++ {
		if i%4 == 0 {
			m := Message{Type: MsgCoordinator, From: from[i/4%2], To: "n3", Term: n.Status().Term + 1, Seq: 1}
			if err := n.Step(m); err != nil {
				t.Fatal(err)
			}
		}
		n.Tick()
		for _, m := range n.Ready().Messages {
			if m.Type == MsgCoordinator && m.From == "n3" {
				t.Fatalf("tick %d: n3 stood without giving n4 its window", i)
			}
			if m.Type == MsgElection && m.To == "n4" {
				return
			}
		}
	}
	t.Fatalf("n3 still waits for n4 %d ticks after it began, refusing lower candidates: %+v", cfg.AnswerTicks+1, n.Status())
}

// TestPreVoteAskedWithinShortAnswerTimeout: with an answer timeout of one
// tick (the least an agent's config accepts), a member that stands asks for
// pre-votes before its window closes. The request used to wait a tick for
// the unasked pre-votes first, the window closed in that same tick, and
// the request never went out: found by the checker (a site of seven with
// quorum 5, leaderless with every member up).
func TestPreVoteAskedWithinShortAnswerTimeout(t *testing.T) {
	members := []Member{{ID: "n1", Priority: 1}, {ID: "n2", Priority: 2}, {ID: "n3", Priority: 3}}
	for _, answer := range []int{1, 2, 3, 4, 10} {
		cfg := testConfig("n3", members)
		cfg.AnswerTicks = answer
		n, err := NewBully(cfg)
		if err != nil {
			t.Fatal(err)
		}
		asked := false
		for i := 0; i < 3*cfg.ElectionTicks; i++ {
			n.Tick()
			rd := n.Ready()
			for _, m := range rd.Messages {
				asked = asked || m.Type == MsgPreVote
			}
			for _, ev := range rd.Events {
				if ev.Kind == EventElectionFailed && ev.Reason == ReasonNoPreVotes {
					if !asked {
						t.Fatalf("answer timeout %d: the pre-vote window closed at tick %d before the request went out", answer, i)
					}
					break
				}
			}
		}
		if !asked {
			t.Fatalf("answer timeout %d: n3 never asked for pre-votes: %+v", answer, n.Status())
		}
	}
}

// TestBullyRefusingPreVoterAsksAgain: a member that asks for pre-votes,
// its waits for the ranks above over, and then refuses a lower candidate
// (whose higher term ends that round) asks again in the new term at once.
// It used to start the election over and wait for a higher member it had
// not yet waited for; lower members that stood more often than it got
// through those waits ended each of its rounds, and a site of seven with
// quorum 6 stayed leaderless (the checker, with answer timeouts differing
// between members; internal/safety TestFoundSeeds replays that run).
func TestBullyRefusingPreVoterAsksAgain(t *testing.T) {
	var members []Member
	for i := 1; i <= 5; i++ {
		members = append(members, Member{ID: fmt.Sprintf("n%d", i), Priority: i})
	}
	cfg := testConfig("n3", members)
	n, err := NewBully(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// n4 and n5 never answer: n3 waits for n5, asks both with ELECTION,
	// and then asks for pre-votes itself.
	asking := false
	for i := 0; i < 3*cfg.ElectionTicks+3*cfg.AnswerTicks && !asking; i++ {
		n.Tick()
		for _, m := range n.Ready().Messages {
			asking = asking || m.Type == MsgPreVote
		}
	}
	if !asking {
		t.Fatalf("n3 never asked for pre-votes: %+v", n.Status())
	}
	term := n.Status().Term
	if err := n.Step(Message{Type: MsgCoordinator, From: "n1", To: "n3", Term: term + 1, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	refused := false
	for _, m := range n.Ready().Messages {
		refused = refused || (m.Type == MsgVote && m.To == "n1" && !m.Granted)
	}
	if !refused {
		t.Fatal("n3 did not refuse the lower candidate")
	}
	for i := 0; i <= cfg.AnswerTicks/4; i++ {
		n.Tick()
		for _, m := range n.Ready().Messages {
			if m.Type == MsgPreVote && m.Term == term+2 {
				return
			}
		}
	}
	t.Fatalf("n3 did not ask for pre-votes in term %d within %d ticks of refusing n1: %+v", term+2, cfg.AnswerTicks/4+1, n.Status())
}
