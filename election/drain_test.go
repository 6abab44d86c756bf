package election

import (
	"errors"
	"testing"
)

// watchNeverLeads fails the test if member id is ever leader or candidate
// from now on (collectReady checks it on every Ready of a drained member;
// this also covers a member that is not drained itself, e.g. one that is
// only known drained).
func runNeverLeads(s *simNet, id string, ticks int) {
	s.t.Helper()
	for range ticks {
		s.tick()
		if s.role[id] != Follower {
			s.t.Fatalf("tick %d: %s is %v; %s", s.now, id, s.role[id], s.describe())
		}
	}
}

func TestDrainedLeaderHandsOverAndStaysOut(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 5, newNode, nil) // hold-down preemption, 100 ticks
		s.runUntil(settle, "first leader", func() bool { l, ok := s.agreed(); return ok && l == "n5" })
		term := s.term("n5")
		s.drain("n5", true)
		// A planned hand-over: the successor leads without a tick.
		if l, ok := s.agreed(); !ok || l != "n4" {
			t.Fatalf("after draining the leader: %s", s.describe())
		}
		if s.term("n4") != term+1 {
			t.Errorf("term %d after the hand-over, want %d", s.term("n4"), term+1)
		}
		// Past the hold-down n5 stays out, though it is the highest and healthy.
		runNeverLeads(s, "n5", 400)
		if l, ok := s.agreed(); !ok || l != "n4" {
			t.Fatalf("after the hold-down: %s", s.describe())
		}
		// The leader knows n5 is drained: it refuses to transfer to it.
		if err := s.nodes["n4"].Resign("n5"); !errors.Is(err, ErrDrained) {
			t.Fatalf("transfer to a drained member: %v", err)
		}
		for _, m := range s.nodes["n4"].Status().Members {
			if (m.ID == "n5") != m.Drained {
				t.Errorf("leader's status: %s drained=%v", m.ID, m.Drained)
			}
		}
		// The leader fails: n3 takes over, not the drained n5.
		s.crash("n4")
		s.runUntil(settle, "failover", func() bool { l, ok := s.agreed(); return ok && l == "n3" })
		runNeverLeads(s, "n5", 200)
		// Undrained, n5 is handed leadership back by hold-down preemption.
		s.drain("n5", false)
		s.runUntil(300, "n5 leads again", func() bool { l, ok := s.agreed(); return ok && l == "n5" })
	})
}

func TestDrainedAtStartNeverStands(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		// The highest member starts drained (its flag was persisted): the
		// group elects the next one, and the drained member never stands,
		// not even once at start-up.
		s := newSim(t, 5, newNode, func(c *Config) { c.Drained = c.ID == "n5" })
		s.runUntil(settle, "first leader", func() bool { l, ok := s.agreed(); return ok && l == "n4" })
		runNeverLeads(s, "n5", 300)
		// A restart keeps it drained (the caller passes the persisted flag).
		s.crash("n5")
		s.run(50)
		s.restart("n5")
		runNeverLeads(s, "n5", 300)
		if l, ok := s.agreed(); !ok || l != "n4" {
			t.Fatalf("after n5's restart: %s", s.describe())
		}
	})
}

func TestDrainedMemberStillVotesAndAcks(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		// Three members, quorum 2. With n3 drained and n2 dead, n1 can lead
		// only with n3's votes and acknowledgements.
		s := newSim(t, 3, newNode, func(c *Config) { c.Drained = c.ID == "n3" })
		s.runUntil(settle, "first leader", func() bool { l, ok := s.agreed(); return ok && l == "n2" })
		s.crash("n2")
		s.runUntil(settle, "n1 leads", func() bool { l, ok := s.agreed(); return ok && l == "n1" })
		// Its lease rests on n3's acknowledgements: it keeps leading.
		runNeverLeads(s, "n3", 300)
		if l, ok := s.agreed(); !ok || l != "n1" {
			t.Fatalf("n1 lost its lease with a drained member acknowledging: %s", s.describe())
		}
		// Cut n3 off: n1 has no quorum left and steps down.
		s.isolate("n3")
		s.runUntil(settle, "n1 steps down", func() bool { return s.role["n1"] != Leader })
	})
}

func TestDrainedNomineeOfOlderLeaderDeclines(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		for _, nominee := range []string{"", "n4"} {
			s := newSim(t, 5, newNode, func(c *Config) { c.Preemption = PreemptNever })
			// The leader runs an older version: it drops the drained flag
			// of the acknowledgements, so it nominates n4 anyway.
			s.rewrite = func(m Message) Message { m.Drained = false; return m }
			s.runUntil(settle, "first leader", func() bool { l, ok := s.agreed(); return ok && l == "n5" })
			s.drain("n4", true)
			s.run(20)
			if err := s.nodes["n5"].Resign(nominee); err != nil {
				t.Fatalf("resign(%q): %v", nominee, err)
			}
			s.collect("n5")
			s.stabilize()
			// n4 declines; the election proceeds without it.
			s.runUntil(settle, "a leader after the decline", func() bool { _, ok := s.agreed(); return ok })
			if l, _ := s.agreed(); l == "n4" {
				t.Fatalf("nominee %q: the drained n4 leads", nominee)
			}
			runNeverLeads(s, "n4", 200)
		}
	})
}

func TestAllDrainedNoLeader(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 3, newNode, nil)
		s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
		for _, id := range s.ids {
			s.drain(id, true)
		}
		for range 500 {
			s.tick()
			for _, id := range s.ids {
				if s.role[id] != Follower {
					t.Fatalf("tick %d: %s is %v with every member drained", s.now, id, s.role[id])
				}
			}
		}
		term := s.term("n1")
		s.run(300)
		if s.term("n1") != term {
			t.Errorf("the term moved from %d to %d with no one standing", term, s.term("n1"))
		}
		s.drain("n1", false)
		s.runUntil(settle, "n1 leads once undrained", func() bool { l, ok := s.agreed(); return ok && l == "n1" })
	})
}

func TestDrainedCandidateGivesUp(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 3, newNode, nil)
		s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
		s.crash("n3")
		s.runUntil(settle, "n2 stands", func() bool { return s.role["n2"] != Follower })
		s.drain("n2", true)
		if s.role["n2"] != Follower {
			t.Fatalf("a drained candidate kept standing: %s", s.describe())
		}
		s.runUntil(settle*2, "n1 leads", func() bool { l, ok := s.agreed(); return ok && l == "n1" })
	})
}

func TestDrainedMembersAboveCandidateAllVote(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		// Four members, quorum 3: with n3 and n4 drained and n2 dead, n1 can
		// lead only with the votes of both drained members above it. (A
		// drained Ring member once swallowed a token that carried the other
		// drained member's vote: the checker found the site leaderless.)
		s := newSim(t, 4, newNode, func(c *Config) { c.Drained = c.ID == "n3" || c.ID == "n4" })
		s.runUntil(settle, "first leader", func() bool { l, ok := s.agreed(); return ok && l == "n2" })
		s.crash("n2")
		s.runUntil(settle*2, "n1 leads", func() bool { l, ok := s.agreed(); return ok && l == "n1" })
		runNeverLeads(s, "n4", 200)
	})
}

// A drained Ring member that believes every other member drained (it
// learned so as leader, and one of them was undrained since) expects no one
// to stand; it must still tell the others that it is alive, as a
// drained member that expects someone does: the one member that may stand
// otherwise presumes it dead, routes its rounds around it, and with every
// other member in the same state the site stays leaderless (the checker
// found that with n=3, two members drained).
func TestRingDrainedMemberWithStaleViewStillAnnouncesItself(t *testing.T) {
	n, c, cfg := drainedRingTop(t, 0)
	c.peerDrained["n1"], c.peerDrained["n2"] = true, true // stale: n1 was undrained since
	told := map[string]bool{}
	for range 3 * cfg.ElectionTicks {
		n.Tick()
		for _, m := range n.Ready().Messages {
			if m.Type == MsgPreVoteReply && m.Granted && m.Seq == 0 {
				told[m.To] = true
			}
		}
	}
	if !told["n1"] || !told["n2"] {
		t.Fatalf("in 3 D without a leader the drained member told %v that it is alive, want n1 and n2", told)
	}
}

// TestRingDrainedMemberTellsMembersItPresumesDead: a drained Ring member
// without a leader tells every member that it is alive every D/2, also one it
// presumes dead. The member that may stand sends a drained member nothing
// while it skips it, so the drained member's own timeouts on it come and go;
// told only while they were gone, it heard the drained member every other D,
// kept finding it unheard for longer than D when its wait for it ended, and
// sent its token past it round after round without a quorum (make
// check-safety: Ring, four members, two drained, leaderless 400 ticks after
// the faults; internal/safety TestFoundSeeds replays that run).
func TestRingDrainedMemberTellsMembersItPresumesDead(t *testing.T) {
	n, c, cfg := drainedRingTop(t, 0)
	r := c.alg.(*ring)
	r.markDead("n1") // a wait for n1's round timed out just now
	if !r.presumedDead("n1") {
		t.Fatal("n1 not presumed dead after its wait timed out")
	}
	told := 0
	// Before the mark lapses (2 D): the first announcements must
	// reach n1 too.
	for range 2*cfg.ElectionTicks - 1 {
		n.Tick()
		for _, m := range n.Ready().Messages {
			if m.Type == MsgPreVoteReply && m.Granted && m.Seq == 0 && m.To == "n1" {
				told++
			}
		}
	}
	if !r.presumedDead("n1") {
		t.Fatal("the mark on n1 lapsed early: the test no longer covers a member presumed dead")
	}
	if told == 0 {
		t.Fatalf("in %d ticks without a leader the drained member did not tell n1, which it presumes dead, that it is alive", 2*cfg.ElectionTicks-1)
	}
}

// TestRingDrainedMemberTellsAliveWhileItVotes: a drained Ring member
// without a leader tells the others it is alive every H, on a deadline of
// its own, also while it votes in the rounds of others. Its announcements
// used to come with its own election's steps, which a vote (and the
// backoff after the round it voted in) put off for up to three D; a member
// that did not hear it within D sent its token past it, and a Ring of three
// with quorum 3 stayed leaderless with every member up (make check-safety,
// with other timings; internal/safety TestFoundSeeds replays that run).
//
// Every H, not every D/2 of its own (members' D may differ; here the
// drained member's is 80 ticks, the others' 30): n2 of a Ring of two,
// drained with D = 80, told n1, whose D is 30, every 40 ticks by a clock
// that ran 3% slow; n1, its backoff at 40 ticks, stood each time 33 ticks
// after the last word, presumed n2 dead, sent its token past it and failed,
// in step with n2's announcements for ever (make check-safety;
// TestFoundSeeds replays two such runs).
func TestRingDrainedMemberTellsAliveWhileItVotes(t *testing.T) {
	n, _, cfg := drainedRingTop(t, 80)
	period := cfg.HeartbeatTicks
	last, seq := -1, uint64(0)
	for i := range 8 * cfg.ElectionTicks {
		if i%7 == 3 {
			// n2 starts a round every 7 ticks; n3 votes in each.
			seq++
			if err := n.Step(Message{Type: MsgRingToken, From: "n2", To: "n3", Term: 1, Seq: seq, Initiator: "n2", Candidate: "n2"}); err != nil {
				t.Fatal(err)
			}
		}
		n.Tick()
		for _, m := range n.Ready().Messages {
			if m.Type == MsgPreVoteReply && m.Granted && m.Seq == 0 && m.To == "n1" {
				last = i
			}
		}
		if i >= cfg.ElectionTicks+period && i-last > period {
			t.Fatalf("tick %d: the drained member last told n1 it is alive at tick %d, more than H (%d ticks) ago", i, last, period)
		}
	}
}

// drainedRingTop returns n3 of a Ring of three, drained, with a D of d
// ticks (0: the others' D).
func drainedRingTop(t *testing.T, d int) (Node, *core, Config) {
	t.Helper()
	members := []Member{{ID: "n1", Priority: 1}, {ID: "n2", Priority: 2}, {ID: "n3", Priority: 3}}
	cfg := testConfig("n3", members)
	cfg.Drained = true
	if d != 0 {
		cfg.ElectionTicks = d
	}
	n, err := NewRing(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n, n.(*core), cfg
}

// TestStandingClearsDrainedKnowledge: what a member learned of another being
// drained (its acknowledgements said so) is dropped when that member shows it
// may stand: its Ring round reaches this member, or it asks for pre-votes,
// proclaims or answers OK. Kept, the knowledge outlived the drain: a drained
// Ring member that believed every member above the lowest drained waited for
// the lowest one's round, which died elsewhere, marked it dead on each
// silence, and every round skipped it (the checker: a Ring of five with
// quorum 5, leaderless with every member up; internal/safety TestFoundSeeds
// replays that run).
func TestStandingClearsDrainedKnowledge(t *testing.T) {
	members := []Member{{ID: "n1", Priority: 1}, {ID: "n2", Priority: 2}, {ID: "n3", Priority: 3}}
	for _, tc := range []struct {
		name string
		alg  func(Config) (Node, error)
		m    Message
	}{
		{"ring token", NewRing, Message{Type: MsgRingToken, From: "n2", To: "n3", Term: 1, Seq: 1, Initiator: "n2", Candidate: "n2"}},
		{"ring token passed on", NewRing, Message{Type: MsgRingToken, From: "n1", To: "n3", Term: 1, Seq: 1, Initiator: "n2", Candidate: "n2", Participants: []string{"n1"}}},
		{"pre-vote", NewRing, Message{Type: MsgPreVote, From: "n2", Term: 1, Seq: 1}},
		{"coordinator", NewBully, Message{Type: MsgCoordinator, From: "n2", Term: 1, Seq: 1}},
		{"ok", NewBully, Message{Type: MsgOK, From: "n2", To: "n3", Term: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("n3", members)
			cfg.Drained = true
			n, err := tc.alg(cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := n.(*core)
			c.peerDrained["n2"] = true // n2's last acknowledgement, as n3 led, said drained
			if c.mayLead("n2") {
				t.Fatal("n2 may lead although its last acknowledgement said drained")
			}
			if err := n.Step(tc.m); err != nil {
				t.Fatal(err)
			}
			if !c.mayLead("n2") {
				t.Fatalf("after n2's %v this member still believes it drained", tc.m.Type)
			}
		})
	}
	// A drained leader's heartbeat says nothing of whether it may stand.
	cfg := testConfig("n1", members)
	n, err := NewRing(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := n.(*core)
	c.peerDrained["n2"] = true
	if err := n.Step(Message{Type: MsgHeartbeat, From: "n2", Term: 1, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if c.mayLead("n2") {
		t.Fatal("a heartbeat cleared what an acknowledgement said of its sender being drained")
	}
}
