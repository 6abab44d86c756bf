package election

import (
	"errors"
	"strings"
	"testing"
)

// A two-gateway site with a witness: three members, quorum 2, the witness
// one of them. collectReady fails a run in which a witness is ever
// candidate or leader, so every test here checks that on every Ready.

// forEachWitnessSite runs f for both algorithms with the witness ranked
// highest (n3: the case in which a member that did not know it would wait
// for it to stand) and lowest (n1).
func forEachWitnessSite(t *testing.T, f func(t *testing.T, s *simNet, witness string, gws [2]string)) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		for _, c := range []struct {
			witness string
			gws     [2]string // lower, higher
		}{{"n3", [2]string{"n1", "n2"}}, {"n1", [2]string{"n2", "n3"}}} {
			t.Run("witness="+c.witness, func(t *testing.T) {
				s := newSim(t, 3, newNode, func(cfg *Config) { cfg.Witnesses = []string{c.witness} })
				f(t, s, c.witness, c.gws)
			})
		}
	})
}

func TestWitnessSiteElectsAGateway(t *testing.T) {
	forEachWitnessSite(t, func(t *testing.T, s *simNet, w string, gws [2]string) {
		s.runUntil(settle, "first leader", func() bool { l, ok := s.agreed(); return ok && l == gws[1] })
		runNeverLeads(s, w, 300)
		if l, ok := s.agreed(); !ok || l != gws[1] {
			t.Fatalf("after 300 ticks: %s", s.describe())
		}
		for _, id := range s.ids {
			for _, m := range s.nodes[id].Status().Members {
				if m.Witness != (m.ID == w) {
					t.Errorf("%s's status: %s witness=%v", id, m.ID, m.Witness)
				}
				if m.Drained {
					t.Errorf("%s's status: %s drained (a witness is not drained)", id, m.ID)
				}
			}
		}
	})
}

// TestWitnessSiteFailsOverEitherWay kills either gateway in turn: the other
// leads on the witness's vote and acknowledgements. The surviving gateway
// does not wait for the witness to stand: from the moment it suspects the
// leader it leads within the answer timeout, which it would spend waiting
// for a higher-ranked member that it did not know never stands.
func TestWitnessSiteFailsOverEitherWay(t *testing.T) {
	forEachWitnessSite(t, func(t *testing.T, s *simNet, w string, gws [2]string) {
		s.runUntil(settle, "first leader", func() bool { l, ok := s.agreed(); return ok && l == gws[1] })
		for round, dead := range []string{gws[1], gws[0], gws[1]} {
			other := gws[0]
			if dead == gws[0] {
				other = gws[1]
			}
			if l, ok := s.agreed(); !ok || l != dead {
				s.runUntil(settle, dead+" leads", func() bool { l, ok := s.agreed(); return ok && l == dead })
			}
			term := s.term(dead)
			s.crash(dead)
			// From the tick at which the survivor no longer follows the
			// dead leader (it may suspect it and lead in the same tick).
			s.runUntil(settle, other+" suspects "+dead, func() bool { return s.nodes[other].Status().Leader != dead })
			took := s.runUntil(settle, other+" leads", func() bool { l, ok := s.agreed(); return ok && l == other })
			if limit := s.cfgs[other].AnswerTicks; took >= limit {
				t.Errorf("round %d: %s led %d ticks after it suspected %s, want under the answer timeout (%d): it waited for the witness",
					round, other, took, dead, limit)
			}
			if s.term(other) <= term {
				t.Errorf("round %d: %s leads term %d, not above %d", round, other, s.term(other), term)
			}
			// Its lease rests on the witness's acknowledgements: it keeps
			// leading with the other gateway down.
			runNeverLeads(s, w, 100)
			if l, ok := s.agreed(); !ok || l != other {
				t.Fatalf("round %d: %s did not keep leading on the witness's acknowledgements: %s", round, other, s.describe())
			}
			s.restart(dead)
			// Hold-down preemption may hand leadership back to the higher
			// gateway; never to the witness.
			s.runUntil(settle*2, "one leader after the restart", func() bool { l, ok := s.agreed(); return ok && l != w })
		}
	})
}

func TestWitnessSiteWithoutWitnessKeepsLeader(t *testing.T) {
	forEachWitnessSite(t, func(t *testing.T, s *simNet, w string, gws [2]string) {
		s.runUntil(settle, "first leader", func() bool { l, ok := s.agreed(); return ok && l == gws[1] })
		term := s.term(gws[1])
		s.crash(w)
		s.run(300)
		if l, ok := s.agreed(); !ok || l != gws[1] || s.term(gws[1]) != term {
			t.Fatalf("with the witness down: %s (want %s leading term %d)", s.describe(), gws[1], term)
		}
		// A witness restart changes nothing.
		s.restart(w)
		runNeverLeads(s, w, 300)
		if l, ok := s.agreed(); !ok || l != gws[1] || s.term(gws[1]) != term {
			t.Fatalf("after the witness's restart: %s (want %s leading term %d)", s.describe(), gws[1], term)
		}
		// The witness and one gateway down: no quorum, the leader steps down.
		s.crash(w)
		s.crash(gws[0])
		s.runUntil(settle, "the lone gateway steps down", func() bool { return s.role[gws[1]] != Leader })
	})
}

func TestWitnessNeverHandedLeadership(t *testing.T) {
	forEachWitnessSite(t, func(t *testing.T, s *simNet, w string, gws [2]string) {
		s.runUntil(settle, "first leader", func() bool { l, ok := s.agreed(); return ok && l == gws[1] })
		leader := s.nodes[gws[1]]
		err := leader.Resign(w)
		if !errors.Is(err, ErrWitness) {
			t.Fatalf("transfer to the witness: %v, want ErrWitness", err)
		}
		if err.Error() != `election: cannot hand over to a witness: it votes but never leads: "`+w+`"` {
			t.Errorf("transfer to the witness: %q", err)
		}
		s.collect(gws[1])
		s.stabilize()
		if l, ok := s.agreed(); !ok || l != gws[1] {
			t.Fatalf("a refused transfer changed the leader: %s", s.describe())
		}
		// A resign with no nominee hands over to the other gateway.
		if err := leader.Resign(""); err != nil {
			t.Fatal(err)
		}
		s.collect(gws[1])
		s.stabilize()
		if l, ok := s.agreed(); !ok || l != gws[0] {
			t.Fatalf("after a resign: %s, want %s leading at once", s.describe(), gws[0])
		}
		runNeverLeads(s, w, 300)
	})
}

func TestWitnessUndrainedStillNeverStands(t *testing.T) {
	forEachWitnessSite(t, func(t *testing.T, s *simNet, w string, gws [2]string) {
		s.runUntil(settle, "first leader", func() bool { l, ok := s.agreed(); return ok && l == gws[1] })
		// Drain then undrain the witness; drain both gateways: the witness
		// still never stands, and the group has no leader.
		s.drain(w, true)
		s.drain(w, false)
		s.drain(gws[1], true)
		s.drain(gws[0], true)
		runNeverLeads(s, w, 300)
		for _, id := range s.ids {
			if s.role[id] != Follower {
				t.Fatalf("%s is %v with both gateways drained", id, s.role[id])
			}
		}
		s.drain(gws[0], false)
		s.runUntil(settle, gws[0]+" leads once undrained", func() bool { l, ok := s.agreed(); return ok && l == gws[0] })
	})
}

// TestWitnessStandingMessagesDropped: a member whose config does not name
// the witness a witness (the lists differ) may send what only a member
// that stands sends; every other member drops it, so it is never elected.
func TestWitnessStandingMessagesDropped(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 3, newNode, func(cfg *Config) { cfg.Witnesses = []string{"n3"} })
		for _, m := range []Message{
			{Type: MsgHeartbeat, From: "n3", Term: 1, Seq: 1},
			{Type: MsgCoordinator, From: "n3", Term: 1, Seq: 1},
			{Type: MsgPreVote, From: "n3", Term: 1, Seq: 1},
			{Type: MsgRingToken, From: "n3", To: "n1", Term: 1, Seq: 1, Initiator: "n3", Candidate: "n3"},
			{Type: MsgRingToken, From: "n2", To: "n1", Term: 1, Seq: 1, Initiator: "n2", Candidate: "n3"},
		} {
			if m.Type == MsgRingToken && !strings.HasSuffix(t.Name(), "/ring") {
				continue // Bully ignores Ring traffic
			}
			if err := s.nodes["n1"].Step(m); !errors.Is(err, ErrBadMessage) {
				t.Errorf("%v from %s for %q: %v, want ErrBadMessage", m.Type, m.From, m.Candidate, err)
			}
			if rd := s.nodes["n1"].Ready(); len(rd.Messages) > 0 || rd.HardStateChanged {
				t.Errorf("%v from %s: n1 acted on it: %+v", m.Type, m.From, rd)
			}
		}
	})
}

func TestWitnessConfigRefused(t *testing.T) {
	members := []Member{{ID: "a"}, {ID: "b"}}
	for _, c := range []struct {
		witnesses []string
		want      string
	}{
		{[]string{"c"}, `election: witness "c" is not a member`},
		{[]string{"a", "a"}, `election: witness "a" listed twice`},
		{[]string{"a", "b"}, "election: every member is a witness: no member may lead"},
	} {
		cfg := testConfig("a", members)
		cfg.Witnesses = c.witnesses
		if _, err := NewBully(cfg); err == nil || err.Error() != c.want {
			t.Errorf("witnesses %v: %v, want %q", c.witnesses, err, c.want)
		}
	}
}

// TestWitnessNominatedByLeaderWithoutTheList: a leader whose list lacks the
// witness (its config not yet changed), and that ignores the drained flag
// of acknowledgements, names the witness in a transfer. The witness
// declines, and the other members do not wait for it: the other gateway
// leads within the answer timeout.
func TestWitnessNominatedByLeaderWithoutTheList(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 3, newNode, func(cfg *Config) {
			cfg.Preemption = PreemptNever
			if cfg.ID != "n2" {
				cfg.Witnesses = []string{"n3"}
			}
		})
		s.rewrite = func(m Message) Message { m.Drained = false; return m }
		s.runUntil(settle, "first leader", func() bool { l, ok := s.agreed(); return ok && l == "n2" })
		if err := s.nodes["n2"].Resign("n3"); err != nil {
			t.Fatalf("transfer to n3 by a leader that does not know it is a witness: %v", err)
		}
		s.collect("n2")
		s.stabilize()
		took := s.runUntil(settle, "a gateway leads", func() bool { l, ok := s.agreed(); return ok && l != "n3" })
		if limit := s.cfgs["n1"].AnswerTicks; took >= limit {
			t.Errorf("a gateway led %d ticks after the transfer, want under the answer timeout (%d)", took, limit)
		}
		runNeverLeads(s, "n3", 200)
	})
}
