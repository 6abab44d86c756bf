package election

import (
	"errors"
	"fmt"
	"testing"
)

// algorithms lists the Node constructors every scenario runs against.
var algorithms = map[string]func(Config) (Node, error){
	"bully": NewBully,
	"ring":  NewRing,
}

func forEachAlgorithm(t *testing.T, f func(t *testing.T, newNode func(Config) (Node, error))) {
	for name, newNode := range algorithms {
		t.Run(name, func(t *testing.T) { f(t, newNode) })
	}
}

const settle = 200 // ticks: generous bound for one election

func TestStartupElectsHighest(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 5, newNode, nil)
		s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
		if l, _ := s.agreed(); l != "n5" {
			t.Fatalf("leader = %s, want n5 (highest rank)", l)
		}
		// It stays: no election for many heartbeats.
		term := s.term("n5")
		s.run(500)
		if l, ok := s.agreed(); !ok || l != "n5" || s.term("n5") != term {
			t.Fatalf("leadership not stable: %s", s.describe())
		}
	})
}

func TestLeaderCrash(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 5, newNode, nil)
		s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
		old := s.term("n5")
		s.crash("n5")
		ticks := s.runUntil(settle, "failover", func() bool { l, ok := s.agreed(); return ok && l == "n4" })
		if s.term("n4") <= old {
			t.Fatalf("new term %d not above %d", s.term("n4"), old)
		}
		// Detection takes D = 30 ticks at most; the election itself a few.
		if ticks > 30+5 {
			t.Errorf("failover took %d ticks, want <= D+5", ticks)
		}
	})
}

func TestTwoCrashes(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 5, newNode, nil)
		s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
		s.crash("n5")
		s.crash("n4")
		s.runUntil(settle, "failover", func() bool { l, ok := s.agreed(); return ok && l == "n3" })
		// A third crash leaves 2 of 5: no quorum, so no leader at all.
		s.crash("n3")
		for i := 0; i < 500; i++ {
			s.tick()
			if s.role["n1"] == Leader || s.role["n2"] == Leader {
				t.Fatalf("tick %d: a leader without quorum: %s", s.now, s.describe())
			}
		}
		s.restart("n4")
		s.runUntil(settle, "quorum regained", func() bool { l, ok := s.agreed(); return ok && l == "n4" })
	})
}

// TestAllDetectAtOnce: every follower suspects in the same tick; the common
// case costs O(n) election deliveries.
func TestAllDetectAtOnceIsLinear(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		for _, n := range []int{5, 25, 100} {
			t.Run(fmt.Sprint(n), func(t *testing.T) {
				s := newSim(t, n, newNode, nil)
				s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
				top := fmt.Sprintf("n%d", n)
				next := fmt.Sprintf("n%d", n-1)
				s.crash(top)
				s.resetCounts()
				s.runUntil(settle, "failover", func() bool { l, ok := s.agreed(); return ok && l == next })
				got := s.electionDeliveries()
				t.Logf("n=%d: %d election deliveries %v", n, got, s.delivered)
				if got > 3*n {
					t.Fatalf("n=%d: %d election deliveries, want <= 3n = %d", n, got, 3*n)
				}
			})
		}
	})
}

func TestPartitionMinorityNeverLeads(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 5, newNode, nil)
		s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
		minority := []string{"n4", "n5"} // the leader is in the minority
		majority := []string{"n1", "n2", "n3"}
		s.partition(minority, majority)
		// The old leader steps down within its lease; the majority elects n3.
		s.runUntil(settle, "majority leader", func() bool { l, ok := s.agreed(majority...); return ok && l == "n3" })
		for i := 0; i < 1000; i++ {
			s.tick()
			for _, id := range minority {
				if s.role[id] != Follower && s.role[id] != Candidate {
					t.Fatalf("tick %d: minority member %s is %v", s.now, id, s.role[id])
				}
			}
		}
		if l, ok := s.agreed(majority...); !ok || l != "n3" {
			t.Fatalf("majority lost its leader: %s", s.describe())
		}
	})
}

func TestPartitionHealGivesOneLeader(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 5, newNode, nil)
		s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
		s.partition([]string{"n4", "n5"}, []string{"n1", "n2", "n3"})
		s.runUntil(settle, "majority leader", func() bool { l, ok := s.agreed("n1", "n2", "n3"); return ok && l == "n3" })
		s.run(100)
		s.heal()
		s.runUntil(settle, "one leader after heal", func() bool { _, ok := s.agreed(); return ok })
		// Hold-down preemption hands leadership back to the highest rank.
		s.runUntil(settle+100, "hand-back to n5", func() bool { l, ok := s.agreed(); return ok && l == "n5" })
	})
}

func TestRestartedNodeWithStaleTerm(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 5, newNode, nil)
		s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
		s.crash("n5")
		stale := s.disk["n5"].Term
		// Push the term up with more failovers while n5 and n1 are down.
		s.runUntil(settle, "n4 leads", func() bool { l, ok := s.agreed(); return ok && l == "n4" })
		s.crash("n4")
		s.runUntil(settle, "n3 leads", func() bool { l, ok := s.agreed(); return ok && l == "n3" })
		s.restart("n4")
		s.runUntil(settle+100, "n4 back", func() bool { l, ok := s.agreed(); return ok && l == "n4" })
		current := s.term("n4")
		if current <= stale+1 {
			t.Fatalf("test setup: term %d not ahead of stale %d", current, stale)
		}
		// n5 returns with a stale term: it must catch up, never lead in an
		// old term, and end up leading in a newer one by hand-over.
		s.restart("n5")
		s.runUntil(settle+200, "n5 leads again", func() bool { l, ok := s.agreed(); return ok && l == "n5" })
		if s.term("n5") <= current {
			t.Fatalf("n5 leads term %d, not above %d", s.term("n5"), current)
		}
	})
}

func TestStaleMessagesRejected(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 3, newNode, nil)
		s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
		s.crash("n3")
		s.runUntil(settle, "n2 leads", func() bool { l, ok := s.agreed(); return ok && l == "n2" })
		s.restart("n3")
		s.runUntil(settle, "n3 back", func() bool { return s.nodes["n3"].Status().Leader != "" })
		before := s.nodes["n1"].Status()
		if before.Term < 2 {
			t.Fatalf("test setup: term %d, want 2 or more", before.Term)
		}
		// A heartbeat of an older term is answered with the current term and
		// no seq (it acknowledges nothing), and reported; nothing else changes.
		if err := s.nodes["n1"].Step(Message{Type: MsgHeartbeat, From: "n3", Term: before.Term - 1, Seq: 5}); err != nil {
			t.Fatalf("stale heartbeat: %v", err)
		}
		rd := s.nodes["n1"].Ready()
		if len(rd.Messages) != 1 || rd.Messages[0].Type != MsgAck || rd.Messages[0].Term != before.Term || rd.Messages[0].Seq != 0 ||
			len(rd.Events) != 1 || rd.Events[0].Kind != EventStaleTerm || rd.HardStateChanged {
			t.Fatalf("stale heartbeat: %+v", rd)
		}
		// Rejected messages change nothing and send nothing.
		for _, m := range []Message{
			{Type: MsgHeartbeat, From: "mallory", Term: 99, Seq: 1},
			{Type: MsgCoordinator, From: "n1", Term: 99, Seq: 1},
			{Type: MsgVote, From: "n2", To: "n3", Term: 99, Granted: true},
			{Type: MsgHeartbeat, From: "n2", Term: 0, Seq: 1},
			{Type: MsgAck, From: "n2", Term: before.Term - 1, Seq: 1},
			{Type: MsgVote, From: "n2", Term: before.Term - 1, Seq: 1, Granted: true},
			{Type: MsgResign, From: "n2", Term: before.Term - 1},
			{Type: MsgAck, From: "n2", To: "n3", Term: before.Term, Seq: 1},
		} {
			if err := s.nodes["n1"].Step(m); err == nil {
				t.Errorf("%+v accepted", m)
			}
			if rd := s.nodes["n1"].Ready(); len(rd.Messages) > 0 || len(rd.Events) > 0 || rd.HardStateChanged {
				t.Errorf("rejected %+v still gave %+v", m, rd)
			}
			after := s.nodes["n1"].Status()
			if after.Term != before.Term || after.Leader != before.Leader || after.Role != before.Role ||
				after.Members[1].TicksSinceSeen != before.Members[1].TicksSinceSeen {
				t.Fatalf("rejected %+v changed state: %+v -> %+v", m, before, after)
			}
		}
	})
}

func TestResignHandsOverAtOnce(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 5, newNode, func(c *Config) { c.Preemption = PreemptNever })
		s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
		if err := s.nodes["n5"].Resign("n2"); err != nil {
			t.Fatal(err)
		}
		s.collect("n5")
		s.stabilize()
		if l, ok := s.agreed(); !ok || l != "n2" {
			t.Fatalf("after transfer without a tick: %s", s.describe())
		}
		if err := s.nodes["n5"].Resign(""); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("resign by follower: %v", err)
		}
		// Resign with no nominee goes to the highest live member but itself.
		if err := s.nodes["n2"].Resign(""); err != nil {
			t.Fatal(err)
		}
		s.collect("n2")
		s.stabilize()
		if l, ok := s.agreed(); !ok || l != "n5" {
			t.Fatalf("after resign: %s", s.describe())
		}
	})
}

func TestPreemptionPolicies(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		for _, tc := range []struct {
			p        Preemption
			wantBack bool
		}{{PreemptNever, false}, {PreemptImmediate, true}, {PreemptHoldDown, true}} {
			s := newSim(t, 3, newNode, func(c *Config) { c.Preemption = tc.p })
			s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
			s.crash("n3")
			s.runUntil(settle, "n2 leads", func() bool { l, ok := s.agreed(); return ok && l == "n2" })
			s.restart("n3")
			back := s.now
			s.run(400)
			l, ok := s.agreed()
			if !ok || (l == "n3") != tc.wantBack {
				t.Fatalf("policy %d: leader %q ok=%v; %s", tc.p, l, ok, s.describe())
			}
			_ = back
		}
	})
}

func TestQuorumOfOneIslandMode(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 2, newNode, func(c *Config) { c.Quorum = 1 })
		s.runUntil(settle, "leader", func() bool { l, ok := s.agreed(); return ok && l == "n2" })
		s.partition([]string{"n1"}, []string{"n2"})
		s.runUntil(settle, "island leader", func() bool { l, ok := s.agreed("n1"); return ok && l == "n1" })
		s.heal()
		s.runUntil(settle, "one leader after heal", func() bool { l, ok := s.agreed(); return ok && l == "n2" })
	})
}

// TestIsolatedLeaderStepsDownBeforeSuccessor: the old leader's lease ends
// before the majority can elect, and it never leads while cut off.
func TestIsolatedLeaderStepsDownBeforeSuccessor(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 5, newNode, nil)
		s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
		s.isolate("n5")
		down := s.runUntil(settle, "n5 steps down", func() bool { return s.role["n5"] != Leader })
		if down > s.cfgs["n5"].LeaseTicks {
			t.Fatalf("isolated leader stepped down after %d ticks, lease is %d", down, s.cfgs["n5"].LeaseTicks)
		}
		s.runUntil(settle, "n4 leads the rest", func() bool { l, ok := s.agreed("n1", "n2", "n3", "n4"); return ok && l == "n4" })
		s.heal()
		s.runUntil(settle+200, "n5 back in charge", func() bool { l, ok := s.agreed(); return ok && l == "n5" })
	})
}

// TestHealWithHeldMessagesGivesOneLeaderSoon: a long split leaves the
// minority n4, n5 deep in election backoff (the agent's: up to 30 H). Their
// attempts to stand never pass the pre-vote (Bully) or never gather a
// quorum of participants (Ring), so their terms stay where they were. At
// the heal their last messages, held up in TCP during the split, arrive
// late. Nothing of it may depose the majority's healthy leader n3: it keeps
// leading in the same term, and the whole group follows it within D.
func TestHealWithHeldMessagesGivesOneLeaderSoon(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		// The agent's backoff: from H (10 ticks) doubling to 30 H.
		s := newSim(t, 5, newNode, func(c *Config) { c.Backoff = &fixedBackoff{Base: 10, Max: 300} })
		s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
		minority := map[string]bool{"n4": true, "n5": true}
		s.partition([]string{"n4", "n5"}, []string{"n1", "n2", "n3"})
		s.runUntil(settle, "majority leader", func() bool { l, ok := s.agreed("n1", "n2", "n3"); return ok && l == "n3" })
		leaderTerm := s.term("n3")
		s.run(1200) // the minority fails elections until its backoff is at its maximum
		// Hold what the minority sends to the majority, as TCP would.
		var held []Message
		s.drop = func(m Message) bool {
			if minority[m.From] && (m.To == "" || !minority[m.To]) {
				held = append(held, m)
			}
			return false
		}
		s.run(300)
		if len(held) == 0 {
			t.Fatalf("the minority sent nothing in 300 ticks: %s", s.describe())
		}
		for _, id := range []string{"n4", "n5"} {
			if s.term(id) > leaderTerm {
				t.Fatalf("%s raised its term to %d while cut off (leader's term %d): %s", id, s.term(id), leaderTerm, s.describe())
			}
		}
		s.drop = nil
		s.heal()
		s.queue = append(s.queue, held...)
		cfg := s.cfgs["n1"]
		took := s.runUntil(settle*3, "one leader after heal", func() bool { _, ok := s.agreed(); return ok })
		if took > cfg.ElectionTicks {
			t.Fatalf("one leader %d ticks after the heal, want at most D = %d: %s", took, cfg.ElectionTicks, s.describe())
		}
		if l, _ := s.agreed(); l != "n3" || s.term("n3") != leaderTerm {
			t.Fatalf("the heal deposed the healthy leader: leader %s term %d, was n3 term %d: %s", l, s.term(l), leaderTerm, s.describe())
		}
		t.Logf("one leader %d ticks after the heal (%d held messages replayed)", took, len(held))
	})
}

// TestOneWayCutMemberNeverDeposesLeader: n2 stops hearing the group (a
// one-way cut: what it sends still arrives). It suspects the leader and
// stands, again and again, but the members that still hear the leader
// never pre-vote for it, so it never raises its term. When the cut heals,
// the leader keeps leading in the same term: no election, no flap.
func TestOneWayCutMemberNeverDeposesLeader(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 5, newNode, func(c *Config) { c.Backoff = &fixedBackoff{Base: 10, Max: 300} })
		s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
		leader, _ := s.agreed()
		term := s.term(leader)
		sent := 0
		for _, o := range s.ids {
			s.cut[[2]string{o, "n2"}] = true
		}
		s.drop = func(m Message) bool {
			if m.From == "n2" && m.Type.IsElectionTraffic() {
				sent++
			}
			return false
		}
		s.run(1000)
		if sent == 0 {
			t.Fatalf("n2 never stood while it could not hear the leader: %s", s.describe())
		}
		if s.term("n2") != term {
			t.Fatalf("n2 raised its term to %d while cut off (leader's term %d): %s", s.term("n2"), term, s.describe())
		}
		if l, ok := s.agreed("n1", "n3", "n4", "n5"); !ok || l != leader || s.term(leader) != term {
			t.Fatalf("the cut-off member disturbed the others: %s", s.describe())
		}
		s.drop = nil
		s.heal()
		s.runUntil(settle, "n2 follows again", func() bool { l, ok := s.agreed(); return ok && l == leader })
		if s.term(leader) != term {
			t.Fatalf("the heal cost an election: term %d, was %d: %s", s.term(leader), term, s.describe())
		}
	})
}

// TestCoordinatorRepeatedOnLossyLink: with an answer timeout of several H
// (the setting for a lossy link), a candidate repeats its COORDINATOR every
// H until the votes are in. Here the first request and the first votes are
// all lost; the repeat wins the election in the same term, without waiting
// out the answer timeout and a backoff.
func TestCoordinatorRepeatedOnLossyLink(t *testing.T) {
	s := newSim(t, 5, NewBully, func(c *Config) { c.AnswerTicks = 40 })
	s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
	term := s.term("n5")
	s.crash("n5")
	lost := map[string]bool{}
	s.drop = func(m Message) bool {
		if m.Type != MsgCoordinator && m.Type != MsgVote {
			return false
		}
		key := fmt.Sprintf("%s/%s/%d", m.Type, m.From, m.Term)
		if m.Term > term && !lost[key] {
			lost[key] = true
			return true
		}
		return false
	}
	s.runUntil(settle, "n4 leads", func() bool { l, ok := s.agreed(); return ok && l == "n4" })
	if got := s.term("n4"); got != term+1 {
		t.Fatalf("n4 leads term %d, want %d: the first election should have succeeded on a repeat", got, term+1)
	}
	if len(lost) == 0 {
		t.Fatal("nothing was dropped: the test did not exercise a loss")
	}
}

// TestBackoffEndsWhenLeaderHeard: n4, cut off for a while, fails to stand
// and draws a long backoff. Once it hears the leader again the damping is
// over: when the leader then crashes, n4 (the highest survivor) takes over
// within D and a few ticks, not after its old backoff.
func TestBackoffEndsWhenLeaderHeard(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 5, newNode, func(c *Config) { c.Backoff = &fixedBackoff{Base: 400, Max: 400} })
		s.runUntil(settle, "first leader", func() bool { l, ok := s.agreed(); return ok && l == "n5" })
		s.isolate("n4")
		s.run(100) // n4 suspects n5, cannot stand, backs off 400 ticks
		s.heal()
		s.runUntil(settle, "n4 follows n5 again", func() bool { l, ok := s.agreed(); return ok && l == "n5" })
		s.run(2 * s.cfgs["n5"].HeartbeatTicks) // n5's heartbeats list n4 as alive again
		s.crash("n5")
		cfg := s.cfgs["n4"]
		took := s.runUntil(settle, "n4 leads", func() bool { l, ok := s.agreed(); return ok && l == "n4" })
		if limit := cfg.ElectionTicks + 2*cfg.AnswerTicks; took > limit {
			t.Fatalf("n4 led %d ticks after the crash, want at most D + 2 answer timeouts = %d", took, limit)
		}
	})
}

// TestLongSplitHealsWithinD: every member is cut off from every other for
// long enough that their election backoffs reach the maximum (30 H). A
// pre-vote that fails is retried after D, not after that backoff, so once
// the links heal the group has a leader within D and a few answer
// timeouts.
func TestLongSplitHealsWithinD(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 5, newNode, func(c *Config) { c.Backoff = &fixedBackoff{Base: 10, Max: 300} })
		s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
		for _, id := range s.ids {
			s.isolate(id)
		}
		s.run(2000)
		s.heal()
		cfg := s.cfgs["n1"]
		took := s.runUntil(settle*3, "a leader after the heal", func() bool { _, ok := s.agreed(); return ok })
		if limit := cfg.ElectionTicks + 3*cfg.AnswerTicks; took > limit {
			t.Fatalf("one leader %d ticks after the heal, want at most D + 3 answer timeouts = %d: %s", took, limit, s.describe())
		}
	})
}

// TestPreVoteRepeatedOnLossyLink: with an answer timeout of several H, a
// member that has to ask for pre-votes asks again every H until its window
// ends. Here the unasked pre-votes and the first request are all lost; the
// repeat still elects within the first window, instead of failing the
// pre-vote and trying again D later.
func TestPreVoteRepeatedOnLossyLink(t *testing.T) {
	s := newSim(t, 5, NewBully, func(c *Config) { c.AnswerTicks = 40 })
	s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
	s.crash("n5")
	lostRequest, lost := false, 0
	s.drop = func(m Message) bool {
		switch {
		case m.Type == MsgPreVoteReply && m.Seq == 0:
			lost++
			return true // every unasked pre-vote
		case m.Type == MsgPreVote && !lostRequest:
			lostRequest = true
			lost++
			return true // the first request
		}
		return false
	}
	cfg := s.cfgs["n4"]
	took := s.runUntil(settle, "n4 leads", func() bool { l, ok := s.agreed(); return ok && l == "n4" })
	if !lostRequest || lost < 2 {
		t.Fatalf("lost %d messages (first request lost: %v): the test did not exercise the repeat", lost, lostRequest)
	}
	if limit := cfg.ElectionTicks + cfg.AnswerTicks; took > limit {
		t.Fatalf("n4 led %d ticks after the crash, want at most D + one answer window = %d", took, limit)
	}
}

// TestNoSplitVoteWhenViewsLeaveEachOtherOut: the leader's last heartbeat
// lists no one else alive (a compromised key forged it, or a leader that
// heard no one for D). When it falls silent, n1 and n2 each expect to be the
// highest live member and ask for pre-votes in the same tick. Each grants the
// other's; without more, both would proclaim the same term and split the
// votes, and the group would wait a failed election and a backoff. The lower
// one gives way to the higher one's request instead.
func TestNoSplitVoteWhenViewsLeaveEachOtherOut(t *testing.T) {
	s := newSim(t, 3, NewBully, nil)
	s.runUntil(settle, "first leader", func() bool { l, ok := s.agreed(); return ok && l == "n3" })
	term := s.term("n3")
	for _, id := range []string{"n1", "n2"} {
		if err := s.nodes[id].Step(Message{Type: MsgHeartbeat, From: "n3", Term: term, Seq: 1000, Alive: []string{"n3"}}); err != nil {
			t.Fatal(err)
		}
		s.collect(id)
	}
	s.queue = nil // the acknowledgements of the forged heartbeat
	s.crash("n3")
	cfg := s.cfgs["n1"]
	took := s.runUntil(settle, "a new leader", func() bool { _, ok := s.agreed("n1", "n2"); return ok })
	if got := s.term("n2"); got != term+1 {
		t.Fatalf("new leader's term %d, want %d: the votes split", got, term+1)
	}
	if limit := cfg.ElectionTicks + cfg.AnswerTicks; took > limit {
		t.Fatalf("a leader %d ticks after the silence began, want at most D + one answer timeout = %d", took, limit)
	}
}
