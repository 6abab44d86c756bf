package election

import (
	"fmt"
	"strings"
	"testing"
)

// Ring-specific scenarios. The shared scenarios (scenario_test.go) run for
// Ring too; these exercise the token: skipped successors, a dying initiator,
// concurrent initiators, lost tokens, partitions.

// newRingSim is a started Ring group of n members led by nN.
func newRingSim(t *testing.T, n int, tweak func(*Config)) *simNet {
	t.Helper()
	s := newSim(t, n, NewRing, tweak)
	s.runUntil(settle, "first leader", func() bool { _, ok := s.agreed(); return ok })
	if l, _ := s.agreed(); l != fmt.Sprintf("n%d", n) {
		t.Fatalf("first leader %s, want n%d", l, n)
	}
	return s
}

// hopTicks is cfg's RingHopTicks after defaults.
func hopTicks(cfg Config) int {
	if err := cfg.validate(); err != nil {
		panic(err)
	}
	return cfg.RingHopTicks
}

// tokenLog records the ring tokens put on the wire (delivered or not).
type tokenLog struct {
	tokens []Message
}

// watch makes s record every ring token it dequeues, and drop those for
// which drop (if set) returns true.
func (l *tokenLog) watch(s *simNet, drop func(Message) bool) {
	s.drop = func(m Message) bool {
		if m.Type == MsgRingToken {
			l.tokens = append(l.tokens, cloneMsg(m))
		}
		return drop != nil && drop(m)
	}
}

// initiators returns the distinct initiators of the recorded tokens.
func (l *tokenLog) initiators() map[string]int {
	out := map[string]int{}
	for _, m := range l.tokens {
		out[m.Initiator]++
	}
	return out
}

// checkRingInvariants checks every recorded token: its participants are
// distinct members listed in ring order (ascending rank, with at most one
// wrap), and it only ever goes to a member that is not yet a participant,
// or, decided, to its best participant.
func checkRingInvariants(t *testing.T, s *simNet, l *tokenLog) {
	t.Helper()
	rank := map[string]int{}
	for i, id := range s.ids {
		rank[id] = i
	}
	for _, m := range l.tokens {
		wraps := 0
		seen := map[string]bool{}
		for i, p := range m.Participants {
			if seen[p] {
				t.Fatalf("token %+v lists %s twice", m, p)
			}
			seen[p] = true
			if i > 0 && rank[p] < rank[m.Participants[i-1]] {
				wraps++
			}
		}
		if wraps > 1 {
			t.Fatalf("token %+v wrapped %d times", m, wraps)
		}
		if seen[m.To] {
			best := m.Participants[0]
			for _, p := range m.Participants {
				if rank[p] > rank[best] {
					best = p
				}
			}
			if m.To != best {
				t.Fatalf("token %+v returned to %s, not to its best participant %s", m, m.To, best)
			}
		}
	}
}

func TestRingSuccessorDead(t *testing.T) {
	s := newRingSim(t, 5, nil)
	var l tokenLog
	l.watch(s, nil)
	// n5 leads; in ring order n4's successor is n5, then n1. n1 dies with the
	// leader, while the last heartbeat still lists it alive.
	s.crash("n5")
	s.crash("n1")
	ticks := s.runUntil(settle, "n4 leads", func() bool { l, ok := s.agreed(); return ok && l == "n4" })
	if max := s.cfgs["n4"].ElectionTicks + hopTicks(s.cfgs["n4"]) + 1; ticks > max {
		t.Errorf("failover took %d ticks, want <= D + one hop timeout + 1 = %d", ticks, max)
	}
	var toN1, toN2 bool
	for _, m := range l.tokens {
		toN1 = toN1 || (m.From == "n4" && m.To == "n1")
		toN2 = toN2 || (m.From == "n4" && m.To == "n2")
	}
	if !toN1 || !toN2 {
		t.Fatalf("n4 did not try n1, then skip to n2: %v", l.tokens)
	}
	checkRingInvariants(t, s, &l)
}

func TestRingTwoConsecutiveSuccessorsDead(t *testing.T) {
	s := newRingSim(t, 7, nil)
	var l tokenLog
	l.watch(s, nil)
	// n6's successors after the dead leader n7 are n1, then n2: both dead.
	// n3..n6 are still a quorum of 7.
	s.crash("n7")
	s.crash("n1")
	s.crash("n2")
	s.runUntil(settle, "n6 leads", func() bool { l, ok := s.agreed(); return ok && l == "n6" })
	var tried []string
	for _, m := range l.tokens {
		if m.From == "n6" && m.Initiator == "n6" {
			tried = append(tried, m.To)
		}
	}
	if got := strings.Join(tried, ","); !strings.HasPrefix(got, "n1,n2,n3") {
		t.Fatalf("n6 handed its token to %s, want n1, n2, then n3", got)
	}
	checkRingInvariants(t, s, &l)
}

func TestRingInitiatorDiesMidRound(t *testing.T) {
	s := newRingSim(t, 5, nil)
	var l tokenLog
	// n4 initiates when n5 goes silent; kill it as soon as its token has
	// left n1, so the round is decided for a dead winner.
	l.watch(s, func(m Message) bool {
		if m.Type == MsgRingToken && m.From == "n1" && m.Initiator == "n4" && !s.crashed["n4"] {
			s.crash("n4")
		}
		return false
	})
	s.crash("n5")
	s.runUntil(settle, "n3 leads", func() bool { l, ok := s.agreed(); return ok && l == "n3" })
	if len(l.initiators()) == 0 {
		t.Fatal("no token seen")
	}
	checkRingInvariants(t, s, &l)
}

// TestRingAllInitiateAtOnce: the leader and the member every view names as
// its successor die together. The others wait for that member, give up in
// the same tick and all initiate; Chang-Roberts swallows every token but
// the highest initiator's at its first hop.
func TestRingAllInitiateAtOnce(t *testing.T) {
	s := newRingSim(t, 9, nil)
	var l tokenLog
	l.watch(s, nil)
	s.crash("n9")
	s.crash("n8")
	s.runUntil(settle, "n7 leads", func() bool { l, ok := s.agreed(); return ok && l == "n7" })
	inits := l.initiators()
	if len(inits) != 7 {
		t.Fatalf("initiators %v, want all 7 survivors", inits)
	}
	for id, hops := range inits {
		if id != "n7" && hops != 1 {
			t.Errorf("%s's token made %d hops, want 1 (swallowed by the next initiator)", id, hops)
		}
	}
	checkRingInvariants(t, s, &l)
}

func TestRingTokenLostInFlight(t *testing.T) {
	s := newRingSim(t, 5, nil)
	var l tokenLog
	dropped := false
	l.watch(s, func(m Message) bool {
		if m.Type == MsgRingToken && m.From == "n1" && !dropped {
			dropped = true // n1's hop to n2 is lost; n1 skips to n3
			return true
		}
		return false
	})
	s.crash("n5")
	ticks := s.runUntil(settle, "n4 leads", func() bool { l, ok := s.agreed(); return ok && l == "n4" })
	if !dropped {
		t.Fatal("no token dropped")
	}
	if max := s.cfgs["n4"].ElectionTicks + hopTicks(s.cfgs["n4"]) + 1; ticks > max {
		t.Errorf("failover took %d ticks, want <= %d", ticks, max)
	}
	checkRingInvariants(t, s, &l)
}

// TestRingLostRoundRetried: every token is lost for a while, so whole rounds
// fail; the initiator retries after a backoff and wins once tokens flow.
func TestRingLostRoundRetried(t *testing.T) {
	s := newRingSim(t, 5, nil)
	var l tokenLog
	lose := true
	l.watch(s, func(m Message) bool { return lose && m.Type == MsgRingToken })
	s.crash("n5")
	s.run(s.cfgs["n4"].ElectionTicks + 40)
	if _, ok := s.agreed(); ok {
		t.Fatalf("elected with every token lost: %s", s.describe())
	}
	before := len(l.initiators())
	lose = false
	s.runUntil(settle, "n4 leads", func() bool { l, ok := s.agreed(); return ok && l == "n4" })
	if before == 0 {
		t.Fatal("no round was tried while tokens were lost")
	}
}

// TestRingPartitionMinorityNeverElects: a 3|2 partition. The minority's
// tokens never gather a quorum of participants, so no minority member even
// proclaims; the majority elects its highest member.
func TestRingPartitionMinorityNeverElects(t *testing.T) {
	s := newRingSim(t, 5, nil)
	minority, majority := []string{"n4", "n5"}, []string{"n1", "n2", "n3"}
	s.partition(minority, majority)
	start := s.now
	check := func() {
		for _, id := range minority {
			oldLease := id == "n5" && s.now-start <= s.cfgs[id].LeaseTicks
			if s.role[id] == Candidate || (s.role[id] == Leader && !oldLease) {
				t.Fatalf("tick %d: minority member %s is %v", s.now, id, s.role[id])
			}
		}
	}
	for i := 0; i < settle; i++ {
		s.tick()
		check()
		if l, ok := s.agreed(majority...); ok && l == "n3" {
			break
		}
	}
	if l, ok := s.agreed(majority...); !ok || l != "n3" {
		t.Fatalf("majority did not elect n3: %s", s.describe())
	}
	for i := 0; i < 1000; i++ {
		s.tick()
		check()
	}
	// Heal: one leader for everyone, and hold-down hands it back to n5.
	s.heal()
	s.runUntil(settle, "one leader after heal", func() bool { _, ok := s.agreed(); return ok })
	s.runUntil(settle+100, "hand-back to n5", func() bool { l, ok := s.agreed(); return ok && l == "n5" })
}

func TestRingRejectsMalformedTokens(t *testing.T) {
	s := newRingSim(t, 3, nil)
	before := s.nodes["n1"].Status()
	for _, m := range []Message{
		{Type: MsgRingToken, From: "n2", Seq: 1, Initiator: "n2", Participants: []string{"n2"}},                       // broadcast
		{Type: MsgRingToken, From: "n2", To: "n1", Initiator: "n2", Participants: []string{"n2"}},                     // no seq
		{Type: MsgRingToken, From: "n2", To: "n1", Seq: 1, Initiator: "zz", Participants: []string{"n2"}},             // initiator
		{Type: MsgRingToken, From: "n2", To: "n1", Seq: 1, Initiator: "n2", Participants: []string{"n2", "zz"}},       // participant
		{Type: MsgRingToken, From: "n2", To: "n1", Seq: 1, Initiator: "n2", Participants: []string{"n2", "n3", "n2"}}, // twice
		{Type: MsgRingToken, From: "n2", To: "n1", Seq: 1, Initiator: "n3", Participants: []string{"n3"}},             // sender not in it
		{Type: MsgRingAck, From: "n2", To: "n1", Seq: 1, Initiator: "n1", Participants: []string{"n2"}},
		{Type: MsgRingAck, From: "n2", To: "n1", Initiator: "n1"},
	} {
		if err := s.nodes["n1"].Step(m); err == nil {
			t.Errorf("%+v accepted", m)
		}
	}
	rd := s.nodes["n1"].Ready()
	after := s.nodes["n1"].Status()
	if len(rd.Messages) > 0 || rd.HardStateChanged || after.Term != before.Term || after.Leader != before.Leader || after.Role != before.Role {
		t.Fatalf("rejected tokens changed state or sent %v", rd.Messages)
	}
}

// TestRingDeliveriesPerElection measures the election deliveries (the
// tokens, their acknowledgements, the COORDINATOR and the votes) from the
// leader's failure to the new leader's quorum:
//
//   - one initiator: the bus reports the leader gone to its successor (the
//     highest survivor) alone, which runs the round while the others still
//     hear the old leader; they learn of it afterwards and grant their kept
//     votes.
//   - all at once: every member notices the silence in the same tick; each
//     would start a round, but only the highest survivor does.
//   - all initiate: the leader and its successor die together; every
//     survivor waits for the successor, then all start a round in the same
//     tick. Chang-Roberts swallows all tokens but one at their first hop,
//     but each costs a delivery and an acknowledgement: 4n+O(1) at least,
//     so this case is bounded by 5n instead.
func TestRingDeliveriesPerElection(t *testing.T) {
	type row struct {
		n                 int
		one, all, allInit int
	}
	var rows []row
	for _, n := range []int{5, 25, 100} {
		top, next := fmt.Sprintf("n%d", n), fmt.Sprintf("n%d", n-1)
		r := row{n: n}

		s := newRingSim(t, n, nil)
		s.run(20)
		s.crash(top)
		s.resetCounts()
		s.leaderGone(top, next)
		s.leaderGone(top, s.running()...)
		if l, ok := s.agreed(); !ok || l != next {
			t.Fatalf("n=%d one initiator: %s", n, s.describe())
		}
		r.one = s.electionDeliveries()

		s = newRingSim(t, n, nil)
		s.crash(top)
		s.resetCounts()
		s.runUntil(settle, "failover", func() bool { l, ok := s.agreed(); return ok && l == next })
		r.all = s.electionDeliveries()

		s = newRingSim(t, n, nil)
		s.crash(top)
		s.crash(next)
		s.resetCounts()
		third := fmt.Sprintf("n%d", n-2)
		s.runUntil(settle, "failover", func() bool { l, ok := s.agreed(); return ok && l == third })
		r.allInit = s.electionDeliveries()
		rows = append(rows, r)

		if r.one > 3*n || r.all > 3*n {
			t.Errorf("n=%d: %d (one initiator) and %d (all at once) deliveries, want <= 3n = %d", n, r.one, r.all, 3*n)
		}
		if r.allInit > 5*n {
			t.Errorf("n=%d: %d deliveries with every survivor initiating, want <= 5n = %d", n, r.allInit, 5*n)
		}
	}
	t.Logf("election deliveries per failover (Ring; 3n is the bound asked)")
	t.Logf("%5s %6s %15s %13s %14s", "n", "3n", "one initiator", "all at once", "all initiate")
	for _, r := range rows {
		t.Logf("%5d %6d %15d %13d %14d", r.n, 3*r.n, r.one, r.all, r.allInit)
	}
}
