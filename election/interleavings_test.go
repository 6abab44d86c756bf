package election_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/edge-agent/edge-agent/election"
	"github.com/edge-agent/edge-agent/internal/safety"
)

// The tests of this file drive a simulated site by hand: every message is
// held until the test delivers, drops or reorders it, and the world checks
// after every step that no two members hold a valid lease at once, that no
// term has two leaders and that no vote changes. Each test is one
// interleaving that once gave two leaders (or a needless election), reduced
// from what the adversarial checker (internal/safety) or a directed search
// found.

// site starts a world of n members that fails t on the first broken
// invariant, printing the events that led there.
func site(t *testing.T, n int, alg string, tweak func(*election.Config), routes bool) *safety.World {
	t.Helper()
	var trace []string
	w := safety.New(safety.Options{
		N: n, Algorithm: alg, Tweak: tweak, Routes: routes,
		Trace: func(l string) { trace = append(trace, l) },
		Fail: func(msg string) {
			t.Helper()
			t.Fatalf("%s\nevents:\n%s", msg, strings.Join(trace, "\n"))
		},
	})
	if os.Getenv("SITE_TRACE") != "" {
		t.Cleanup(func() { t.Logf("events:\n%s", strings.Join(trace, "\n")) })
	}
	return w
}

// run delivers what the test does not hold and ticks, k times.
func run(w *safety.World, k int, hold func(*safety.Msg) bool) {
	for i := 0; i < k; i++ {
		w.DeliverAll(func(f *safety.Msg) bool { return hold == nil || !hold(f) })
		w.Ticks(1)
	}
	w.DeliverAll(func(f *safety.Msg) bool { return hold == nil || !hold(f) })
}

// until runs until cond holds, failing after limit ticks.
func until(t *testing.T, w *safety.World, limit int, what string, hold func(*safety.Msg) bool, cond func() bool) {
	t.Helper()
	for i := 0; i <= limit; i++ {
		if cond() {
			return
		}
		run(w, 1, hold)
	}
	t.Fatalf("%s did not happen within %d ticks: %s", what, limit, w.Describe())
}

func leads(w *safety.World, id string) func() bool {
	return func() bool { l, ok := w.Agreed(); return ok && l == id }
}

func mustBeOne(t *testing.T, fs []*safety.Msg, what string) *safety.Msg {
	t.Helper()
	if len(fs) != 1 {
		t.Fatalf("%s: %d in flight, want 1", what, len(fs))
	}
	return fs[0]
}

// 1. Ring hand-over: n3 hands over to n2, but its RESIGN reaches n2 late.
// n2, no longer hearing n3, starts a Ring round of its own first, and n1
// (released by the RESIGN) votes for it in the round's token. Then the
// RESIGN reaches n2, which proclaims with a COORDINATOR of that same term;
// n1 grants it as the repeat of a request it already granted. n2 leads on a
// lease that counts n1's vote, so n1 must stick to n2 for D, although it has
// not heard n2's first heartbeat yet: it must not vote in n3's next round.
func TestRingHandOverVoteByTokenThenCoordinatorSticks(t *testing.T) {
	w := site(t, 3, "ring", func(c *election.Config) {
		c.AnswerTicks = 40 // n1 and n3 still wait for n2's round when it comes
		c.Preemption = election.PreemptNever
	}, false)
	until(t, w, 200, "n3 leads", nil, leads(w, "n3"))
	if err := w.Resign("n3", "n2"); err != nil {
		t.Fatal(err)
	}
	resign := mustBeOne(t, w.Find(election.MsgResign, "n3", "n2", 0), "RESIGN to n2")
	hold := func(f *safety.Msg) bool {
		return f == resign || (f.M.From == "n2" && f.To == "n3") || (f.M.From == "n3" && f.To == "n2") ||
			(f.M.Type == election.MsgRingToken && f.To == "n2") ||
			(f.M.Type == election.MsgHeartbeat && f.M.From == "n2" && w.Role("n2") == election.Leader)
	}
	until(t, w, 100, "n1's vote for n2 in n2's token", hold, func() bool {
		return len(w.Find(election.MsgRingToken, "n1", "n2", 0)) > 0
	})
	w.Deliver(resign, false) // n2 proclaims: a COORDINATOR of the token's term
	resign = nil
	until(t, w, 20, "n2 leads", hold, func() bool { return w.Role("n2") == election.Leader })
	// n3 hears nothing of n2 and starts its own round; n1 must keep it
	// while n2's lease may count n1's vote (the world checks that no two
	// leases overlap). n2's heartbeats never arrive, so n2's lease runs
	// out and n3 may lead after that.
	until(t, w, 200, "n3 leads", hold, func() bool { return w.Role("n3") == election.Leader })
}

// 2. A restarted leader's heartbeat counter starts again at 1. A heartbeat
// of its previous incarnation, held in the network, reaches n2 late; n2
// answers it as stale, with its own term and the stale heartbeat's seq. The
// restarted leader must not take that answer for n2's acknowledgement of its
// own heartbeat of the same seq: n2 never heard it, and votes for n4 while
// n5's lease would count it.
func TestRestartedLeaderDoesNotCountAnswerToStaleHeartbeat(t *testing.T) {
	w := site(t, 5, "bully", func(c *election.Config) { c.HoldDownTicks = 30 }, false)
	until(t, w, 200, "n5 leads", nil, leads(w, "n5"))
	term1 := w.Term("n5")
	// n2 stops hearing n5's heartbeats; they stay in the network.
	var held []*safety.Msg
	heldTo2 := func(f *safety.Msg) bool { return f.M.From == "n5" && f.To == "n2" && f.M.Term == term1 }
	run(w, 60, heldTo2)
	held = w.Find(election.MsgHeartbeat, "n5", "n2", term1)
	if len(held) < 5 {
		t.Fatalf("%d heartbeats held", len(held))
	}
	keep := map[*safety.Msg]bool{}
	for _, f := range held {
		keep[f] = true
	}
	isHeld := func(f *safety.Msg) bool { return keep[f] }
	w.Crash("n5")
	until(t, w, 200, "n4 leads", isHeld, leads(w, "n4"))
	w.Restart("n5")
	until(t, w, 400, "n5 leads again, by hold-down hand-over", isHeld, leads(w, "n5"))
	// n3 and n4 are cut off from n5, n5's new messages no longer reach n2
	// (what n2 sends still reaches n5), and n1 keeps acknowledging. Each new
	// heartbeat of n5 is matched by the held one of the same seq, delivered
	// to n2.
	for _, id := range []string{"n3", "n4"} {
		w.Cut("n5", id)
		w.Cut(id, "n5")
	}
	seqHeld := map[uint64]*safety.Msg{}
	for _, f := range held {
		seqHeld[f.M.Seq] = f
	}
	matched := 0
	for i := 0; i < 80; i++ {
		for _, hb := range w.Find(election.MsgHeartbeat, "n5", "n1", w.Term("n5")) {
			if f := seqHeld[hb.M.Seq]; f != nil && keep[f] {
				delete(keep, f)
				w.Deliver(f, false)
				matched++
			}
		}
		w.DropAll(func(f *safety.Msg) bool { return f.M.From == "n5" && f.To == "n2" && !isHeld(f) })
		w.DeliverAll(func(f *safety.Msg) bool { return !isHeld(f) })
		w.Ticks(1)
	}
	if matched == 0 {
		t.Fatal("no held heartbeat matched a new one")
	}
	// n5's lease ran out (the world checks it did before n4 led); n2, n3
	// and n4 follow n4.
	if w.Role("n5") == election.Leader || w.Role("n4") != election.Leader {
		t.Fatalf("n4 should lead, n5 not: %s", w.Describe())
	}
}

// 3. n3's own connection drops; it stops leading, reconnects with a new
// connection and is elected again in the next term. Its voters still know
// the connection of its previous term. The server's report that that old
// connection closed arrives now, late but true: it is about n3's previous
// leadership and must not release the voters from the one they just voted
// for.
func TestStaleDisconnectReportAfterReelection(t *testing.T) {
	w := site(t, 3, "bully", nil, false)
	until(t, w, 200, "n3 leads", nil, leads(w, "n3"))
	run(w, 20, nil) // heartbeats announce n3's connection
	term := w.Term("n3")
	w.Disconnect("n3")
	stale := w.Advisories[len(w.Advisories)-1]
	w.Advisories = nil
	// n3 stands again; hold its first heartbeats of the new term.
	newHB := func(f *safety.Msg) bool { return f.M.Type == election.MsgHeartbeat && f.M.Term > term }
	until(t, w, 200, "n3 leads the next term", newHB, func() bool { return w.Role("n3") == election.Leader })
	w.Report("n1", stale)
	w.Report("n2", stale)
	run(w, 40, newHB)
	if w.Role("n2") == election.Leader {
		t.Fatalf("n2 leads on a stale report: %s", w.Describe())
	}
}

// 4. At an offline site the route between n2's and n3's servers closes while
// both run (n1 has not heard n3 for D: its link from n3 is cut). n2 may act
// on it as a report that it lost the leader, but n3's lease counts n2's
// acknowledgement: n3 must not go on counting it once the route is gone.
func TestRouteClosureToLeaseMemberEndsLease(t *testing.T) {
	w := site(t, 3, "bully", nil, true)
	until(t, w, 200, "n3 leads", nil, leads(w, "n3"))
	w.Cut("n3", "n1")
	run(w, 45, nil) // n1 has not heard n3 for D
	w.RouteDown("n2", "n3", false, nil)
	run(w, 40, nil)
}

// 5. n3 missed n2's election (cut off), and a copy of n2's COORDINATOR is
// held in the network. n3 then follows n2 and acknowledges its heartbeats;
// n1 stops hearing n2 and tells n3, the member it expects to stand, that it
// would vote for it (an unasked pre-vote). Then the late COORDINATOR reaches
// n3: a message of the election n2 already won. n3 outranks n2, but it must
// not refuse and stand on it: n2's lease rests on n3's acknowledgements.
func TestLateCoordinatorOfOwnLeaderIsIgnored(t *testing.T) {
	w := site(t, 3, "bully", func(c *election.Config) { c.Preemption = election.PreemptNever }, false)
	until(t, w, 200, "n3 leads", nil, leads(w, "n3"))
	// n3 is cut off: everything to and from it is held.
	cutOff := func(f *safety.Msg) bool { return f.M.From == "n3" || f.To == "n3" }
	until(t, w, 200, "n2 leads", cutOff, func() bool { return w.Role("n2") == election.Leader })
	late := mustBeOne(t, w.Find(election.MsgCoordinator, "n2", "n3", 0), "COORDINATOR of n2 held for n3")
	w.DropAll(func(f *safety.Msg) bool { return cutOff(f) && f != late })
	hold := func(f *safety.Msg) bool {
		return f == late || (f.M.Type == election.MsgPreVoteReply && f.M.From == "n1" && f.To == "n3")
	}
	until(t, w, 100, "n3 follows n2", hold, leads(w, "n2"))
	w.Cut("n2", "n1")
	until(t, w, 100, "n1's pre-vote for n3", hold, func() bool {
		return len(w.Find(election.MsgPreVoteReply, "n1", "n3", 0)) > 0
	})
	hbTo3 := func(f *safety.Msg) bool {
		return hold(f) || (f.M.Type == election.MsgHeartbeat && f.M.From == "n2" && f.To == "n3")
	}
	until(t, w, 20, "a heartbeat of n2 for n3", hbTo3, func() bool {
		return len(w.Find(election.MsgHeartbeat, "n2", "n3", 0)) > 0
	})
	w.DeliverAll(func(f *safety.Msg) bool { return f.M.Type == election.MsgHeartbeat })
	w.DeliverAll(func(f *safety.Msg) bool { return f.M.Type == election.MsgPreVoteReply })
	w.Deliver(late, false)
	run(w, 40, nil)
	if w.Role("n3") == election.Leader {
		t.Fatalf("n3 leads: %s", w.Describe())
	}
}

// 6. Ring: n4 leads while n5 follows (n5 came back after n4 was elected,
// and preemption is off). n1's and n2's acknowledgements stop reaching n4,
// so its heartbeats leave them out of the live view, which n5 keeps. Then n4
// dies and the links heal. n5, the highest, starts round after round; each
// skips n1 and n2 as presumed dead, gathers n3's vote alone and comes back
// short of a quorum. n1 and n2 never send to n5 (their successors are n2 and
// n3, which swallow their tokens for n5's round). Every member is up and
// reachable, yet no leader: the view of a leader long gone must lapse.
func TestRingStaleViewDoesNotLivelock(t *testing.T) {
	w := site(t, 5, "ring", func(c *election.Config) { c.Preemption = election.PreemptNever }, false)
	w.Crash("n5")
	until(t, w, 300, "n4 leads", nil, func() bool { l, ok := w.Agreed(); return ok && l == "n4" })
	w.Restart("n5")
	until(t, w, 100, "n5 follows n4", nil, func() bool { return w.Leader("n5") == "n4" })
	w.Cut("n1", "n4")
	w.Cut("n2", "n4")
	// n4's heartbeats list n3, n4 and n5 alone once n1 and n2 have been
	// silent for D.
	run(w, 2*w.Config("n4").ElectionTicks, nil)
	w.Crash("n4")
	w.Heal()
	cfg := w.Config("n1")
	// The members suspect n4 D after its last heartbeat; the view lapses 2D
	// after it; a round then takes a few hops, and a member backing off
	// after a failed round waits up to 40 ticks.
	limit := 3*cfg.ElectionTicks + 4*cfg.AnswerTicks + 40
	until(t, w, limit, "a new leader", nil, func() bool { _, ok := w.Agreed(); return ok })
}

// 7. n1 acts on the server's report that the leader n5 is gone and votes for
// n4, then is cut off before it hears n4's first heartbeat. Alone, it later
// stands: it must ask for pre-votes first, as any member that no longer hears
// its leader, and not raise its term on the strength of the old report; else
// its higher term deposes the healthy n4 when the link heals.
func TestOldDisconnectReportDoesNotSkipPreVote(t *testing.T) {
	w := site(t, 5, "bully", func(c *election.Config) { c.Preemption = election.PreemptNever }, false)
	until(t, w, 200, "n5 leads", nil, leads(w, "n5"))
	run(w, 20, nil)
	w.Crash("n5")
	adv := w.Advisories[len(w.Advisories)-1]
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		w.Report(id, adv)
	}
	hb := func(f *safety.Msg) bool { return f.M.Type == election.MsgHeartbeat && f.To == "n1" }
	until(t, w, 20, "n4 leads", hb, func() bool { return w.Role("n4") == election.Leader })
	term := w.Term("n4")
	w.Isolate("n1")
	w.DropAll(hb)
	run(w, 300, nil)
	w.Heal()
	run(w, 100, nil)
	if l, ok := w.Agreed(); !ok || l != "n4" || w.Term("n4") != term {
		t.Fatalf("the heal deposed n4 (term %d): %s", term, w.Describe())
	}
}

// 8. n3 hands over to n2 while n1 is down. n2's first COORDINATOR is lost,
// and its repeat reaches n3 after n3's backoff: n3 must grant it (it named
// n2 itself), not refuse it as outranked and stand again.
func TestTransferWithMemberDown(t *testing.T) {
	w := site(t, 3, "bully", func(c *election.Config) {
		c.AnswerTicks = 30 // a candidate repeats its COORDINATOR every H
		c.Preemption = election.PreemptNever
	}, false)
	until(t, w, 200, "n3 leads", nil, leads(w, "n3"))
	w.Crash("n1")
	if err := w.Resign("n3", "n2"); err != nil {
		t.Fatal(err)
	}
	w.DeliverAll(func(f *safety.Msg) bool { return f.M.Type == election.MsgResign })
	w.DropAll(func(f *safety.Msg) bool { return f.M.Type == election.MsgCoordinator })
	until(t, w, 60, "n2 leads", nil, leads(w, "n2"))
}

// 9. (found by the checker after the eight above) A candidate's own bus
// connection closes while the acknowledgements of its announcement are on
// their way: n2's Ring round won n1's vote and n2 announced itself with a
// heartbeat carrying its old connection, then that connection closed. n1's
// acknowledgement still reaches n2, and the server's advisory that n2's old
// connection closed reaches n1, which releases its backing of n2 (rule 5)
// and votes for n3. n2 must not lead on that acknowledgement: an agent whose
// connection closed stops standing as it stops leading.
func TestCandidateWhoseConnectionClosedDoesNotLead(t *testing.T) {
	w := site(t, 3, "ring", nil, true)
	until(t, w, 200, "n3 leads", nil, leads(w, "n3"))
	w.RouteDown("n1", "n3", false, nil)
	w.RouteDown("n2", "n3", false, nil)
	ack := func(f *safety.Msg) bool { return f.M.Type == election.MsgAck && f.M.From == "n1" && f.To == "n2" }
	until(t, w, 200, "n1's acknowledgement of n2's announcement", ack, func() bool {
		return w.Role("n2") == election.Candidate && len(w.Find(election.MsgAck, "n1", "n2", 0)) > 0
	})
	w.RouteUp("n1", "n3")
	w.Disconnect("n2")
	closed := w.Advisories[len(w.Advisories)-1]
	w.DeliverAll(ack)
	w.Report("n1", closed)
	fromN2 := func(f *safety.Msg) bool { return f.M.From == "n2" }
	until(t, w, 300, "n3 leads", fromN2, func() bool { return w.Role("n3") == election.Leader })
}

// 10. (found by the checker, with drain) Liveness, not safety: a candidate
// that gives way must free its voters. n2, n4 and n5 are drained; n1 has
// marked n3 down and proclaims. n2 votes for it, then n3 refuses it (Bully:
// n3 outranks n1 and may stand) and n1 gives way to n3; n4 and n5 vote for
// n1 after that. Their votes hold them for D (n1 might lead on them), so
// they would keep back n3's pre-vote past its answer window: n3 failed, n1
// stood again after its backoff, was refused again, and the site stayed
// leaderless with every member up. n1's WITHDRAW frees them at once: n3
// wins its first pre-vote.
func TestCandidateThatGivesWayFreesItsVoters(t *testing.T) {
	w := site(t, 5, "bully", func(c *election.Config) {
		c.Preemption = election.PreemptNever
	}, false)
	for _, id := range []string{"n2", "n4", "n5"} {
		w.Drain(id, true)
	}
	n3 := func(f *safety.Msg) bool { return f.M.From == "n3" || f.To == "n3" }
	hold := func(f *safety.Msg) bool { return n3(f) || f.M.Type == election.MsgCoordinator }
	until(t, w, 200, "n1 stands, n3 unheard", hold, func() bool {
		return w.Role("n1") == election.Candidate && len(w.Find(election.MsgCoordinator, "n1", "n3", 0)) == 1
	})
	term := w.Term("n1")
	deliver := func(typ election.MsgType, from, to string) {
		t.Helper()
		w.Deliver(mustBeOne(t, w.Find(typ, from, to, term), fmt.Sprintf("%s %s->%s", typ, from, to)), false)
	}
	// What n3 missed while unheard is lost; its own election starts now.
	w.DropAll(func(f *safety.Msg) bool { return n3(f) && f.M.Type != election.MsgCoordinator })
	deliver(election.MsgCoordinator, "n1", "n2")
	deliver(election.MsgVote, "n2", "n1")
	deliver(election.MsgCoordinator, "n1", "n3")
	deliver(election.MsgVote, "n3", "n1")
	if w.Role("n1") != election.Follower {
		t.Fatalf("n1 did not give way to n3's refusal: %s", w.Describe())
	}
	deliver(election.MsgCoordinator, "n1", "n4")
	deliver(election.MsgCoordinator, "n1", "n5")
	// n3 does not know that n4 and n5 are drained (a member learns it from
	// acknowledgements, as a leader): it waits one answer window for n4 to
	// stand, one for an OK to its ELECTION, one for its pre-vote.
	limit := 4 * w.Config("n3").AnswerTicks
	until(t, w, limit, "n3 leads", nil, leads(w, "n3"))
	if got := w.Term("n3"); got != term+1 {
		t.Errorf("n3 leads term %d, want %d: one election, no failed round", got, term+1)
	}
}

// 12. A nomination that came to nothing silenced its member for good. n2
// leads a Ring of three whose quorum is all three and hands over to n1; its
// RESIGN reaches n3 but never n1, and then n3 is drained (no one learns it:
// there is no leader to acknowledge). n1 and n2 expect n3 to start the
// round, wait for it in vain, mark it dead and send their tokens past it,
// so they need n3 to tell them it is alive (a drained member's unasked
// pre-vote, every D). n3 kept silent while it remembered the nomination,
// and it remembered it until a leader was heard: none ever was. The
// checker found it once its sites got quorums above a majority.
func TestStaleNominationDoesNotSilenceDrainedMember(t *testing.T) {
	for _, alg := range []string{"ring", "bully"} {
		t.Run(alg, func(t *testing.T) {
			w := site(t, 3, alg, func(c *election.Config) {
				c.Quorum = 3
				c.Preemption = election.PreemptNever
			}, false)
			until(t, w, 200, "n3 leads", nil, leads(w, "n3"))
			if err := w.Resign("n3", "n2"); err != nil {
				t.Fatal(err)
			}
			until(t, w, 200, "n2 leads", nil, leads(w, "n2"))
			if err := w.Resign("n2", "n1"); err != nil {
				t.Fatal(err)
			}
			w.Drop(mustBeOne(t, w.Find(election.MsgResign, "n2", "n1", 0), "RESIGN to n1"))
			w.Drain("n3", true)
			until(t, w, 20*w.Config("n3").ElectionTicks, "a leader", nil, func() bool {
				l, ok := w.Agreed()
				return ok && l != ""
			})
		})
	}
}

// 13. (found by a review, not by the checker) A repeat of a losing
// candidacy took a member from the term's winner. n4's answer timeout is 2H,
// so it repeats its COORDINATOR of term 1 while its votes are not in; n1
// voted for its first request. n5 (started late) wins term 1 with the votes
// of n2 and n3, and n1 acknowledges n5's heartbeats, which n5's lease
// counts. n4's repeat then reaches n1: granted again as a repeat, it made n1
// back n4 instead of n5, n1 granted n4's next-term pre-vote and vote at once
// (the member it backs asking for a later term), n3 added its vote once D
// had passed since its own vote for n5, and n4 led term 2 while n5's lease
// of term 1 still counted n1's acknowledgement ("n4 and n5 both hold a valid
// lease"). Now a repeat is granted again only while the member backs that
// candidate or no live leader.
func TestLateRepeatOfLosingCandidacyGivesNoSecondLease(t *testing.T) {
	const restart5 = 135 // n5 starts late: it stands at 165 and asks at 170
	w := site(t, 5, "bully", func(c *election.Config) { c.AnswerTicks = 20 }, false)
	for _, p := range [][2]string{{"n4", "n5"}, {"n1", "n2"}, {"n1", "n3"}} {
		w.Cut(p[0], p[1])
		w.Cut(p[1], p[0])
	}
	w.Crash("n5")
	// n4's first COORDINATOR of term 1 reaches n1 only; its repeats are held.
	hold := func(f *safety.Msg) bool {
		return f.M.Type == election.MsgCoordinator && f.M.From == "n4" && f.M.Term == 1 && (f.To != "n1" || f.M.Seq != 1)
	}
	until(t, w, 100, "n1's vote for n4 in term 1", hold, func() bool { return w.Status("n1").Term == 1 })
	until(t, w, 30, "n4 repeats its COORDINATOR", hold, func() bool {
		return len(w.Find(election.MsgCoordinator, "n4", "n1", 1)) > 0
	})
	repeat := mustBeOne(t, w.Find(election.MsgCoordinator, "n4", "n1", 1), "n4's repeat to n1")
	// From now on n4 hears nothing and is heard by no one (its repeat to n1
	// stays in the network) until the repeat is delivered.
	for _, o := range []string{"n1", "n2", "n3"} {
		w.Cut("n4", o)
		w.Cut(o, "n4")
	}
	w.DropAll(func(f *safety.Msg) bool { return f != repeat && (f.M.From == "n4" || f.To == "n4") })
	hold = func(f *safety.Msg) bool { return f == repeat }
	run(w, restart5-int(w.Now/safety.TickUnits), hold)
	w.Restart("n5")
	// n5 stands in term 1 on the pre-votes of n2 and n3; n1's refusal of
	// its pre-vote and n5's COORDINATOR to n1 are lost.
	hold5 := func(f *safety.Msg) bool {
		return hold(f) || (f.M.From == "n1" && f.To == "n5" && f.M.Type == election.MsgPreVoteReply) ||
			(f.M.From == "n5" && f.To == "n1" && f.M.Type == election.MsgCoordinator)
	}
	until(t, w, 60, "n5 leads term 1", hold5, func() bool { return w.Role("n5") == election.Leader })
	if w.Term("n5") != 1 {
		t.Fatalf("n5 leads term %d, want 1", w.Term("n5"))
	}
	won := w.Now
	w.DropAll(func(f *safety.Msg) bool { return hold5(f) && f != repeat })
	w.Cut("n5", "n3") // n3 backs n5 from its vote only
	until(t, w, 25, "n1's acknowledgement of n5's heartbeat sent 2H after the win", hold, func() bool {
		return w.Now >= won+20*safety.TickUnits && len(w.Find(election.MsgHeartbeat, "n5", "n1", 1)) == 0
	})
	w.Cut("n5", "n1") // n5's later heartbeats do not reach n1
	if !w.HasLease("n5") {
		t.Fatalf("n5 holds no lease when the repeat arrives: the test no longer covers the race: %s", w.Describe())
	}
	for _, o := range []string{"n1", "n2", "n3"} {
		w.HealLink("n4", o)
		w.HealLink(o, "n4")
	}
	w.Deliver(repeat, false)
	if l := w.Status("n1").Leader; l != "n5" {
		t.Fatalf("after n4's late repeat n1 names %q its leader, want n5", l)
	}
	// The world fails the test if n4 (or anyone) holds a lease beside n5's.
	run(w, 40, nil)
}

// 14. The same with a network duplicate of n4's first COORDINATOR, at the
// default timing: n4 crashed after it, and restarted, asks for term 2.
func TestDuplicateOfLosingCandidacyGivesNoSecondLease(t *testing.T) {
	w := site(t, 5, "bully", nil, false)
	for _, p := range [][2]string{{"n4", "n5"}, {"n1", "n2"}, {"n1", "n3"}} {
		w.Cut(p[0], p[1])
		w.Cut(p[1], p[0])
	}
	w.Crash("n5")
	var dup *safety.Msg
	hold := func(f *safety.Msg) bool {
		// n4's COORDINATOR reaches only n1, and its copy waits.
		return f == dup || (f.M.Type == election.MsgCoordinator && f.M.From == "n4" && f.M.Term == 1)
	}
	until(t, w, 100, "n4 proclaims term 1", hold, func() bool {
		return len(w.Find(election.MsgCoordinator, "n4", "n1", 1)) > 0
	})
	c4 := mustBeOne(t, w.Find(election.MsgCoordinator, "n4", "n1", 1), "n4's COORDINATOR to n1")
	w.Deliver(c4, true) // n1 votes for n4 in term 1; a copy stays in the network
	dup = c4
	w.DropAll(func(f *safety.Msg) bool { return f != dup && f.M.From == "n4" && f.M.Type == election.MsgCoordinator })
	w.Crash("n4") // its candidacy cannot win
	run(w, 48, hold)
	w.Restart("n5")
	run(w, 7, hold)
	w.Restart("n4")
	// n5 stands in term 1 (pre-votes of n2 and n3); n1's refusal of its
	// pre-vote is lost.
	hold5 := func(f *safety.Msg) bool {
		return hold(f) || (f.M.From == "n1" && f.To == "n5" && f.M.Type == election.MsgPreVoteReply)
	}
	until(t, w, 40, "n5 leads term 1", hold5, func() bool { return w.Role("n5") == election.Leader })
	if w.Term("n5") != 1 {
		t.Fatalf("n5 leads term %d, want 1", w.Term("n5"))
	}
	won := w.Now
	w.DropAll(func(f *safety.Msg) bool { return f.M.Type == election.MsgCoordinator && f.M.From == "n5" })
	w.Cut("n5", "n3") // n3 hears no more of n5 after its vote
	until(t, w, 25, "n1's acknowledgement of n5's heartbeat sent 2H after the win", hold, func() bool {
		return w.Now >= won+20*safety.TickUnits && len(w.Find(election.MsgHeartbeat, "n5", "n1", 1)) == 0
	})
	w.Cut("n5", "n1")
	if !w.HasLease("n5") {
		t.Fatalf("n5 holds no lease when the duplicate arrives: the test no longer covers the race: %s", w.Describe())
	}
	w.Deliver(dup, false)
	dup = nil
	if l := w.Status("n1").Leader; l != "n5" {
		t.Fatalf("after the duplicate of n4's COORDINATOR n1 names %q its leader, want n5", l)
	}
	run(w, 40, nil)
}

// 15. The fast path's candidate sends its COORDINATOR before its vote for
// itself is on disk (Ready.SendFirst), and crashes before the save ends: a
// voter granted the request, but the candidate restarts in the old term
// with no vote in the new one. It may now vote in that term for another
// member, which then leads it with that vote: the lost vote was never
// counted, so the term still has one leader, and the voter that granted the
// lost candidacy never counts for two.
func TestCandidateCrashedBeforeSavingItsVote(t *testing.T) {
	for _, alg := range []string{"bully", "ring"} {
		t.Run(alg, func(t *testing.T) {
			w := site(t, 3, alg, nil, false)
			until(t, w, 200, "n3 leading", nil, leads(w, "n3"))
			run(w, 20, nil) // heartbeats announce n3's connection
			term := w.Term("n3")
			w.Crash("n3")
			gone := w.Advisories[len(w.Advisories)-1]
			w.Report("n2", gone)
			req := mustBeOne(t, w.Find(election.MsgCoordinator, "n2", "n1", term+1), "n2's request")
			w.Report("n1", gone)
			w.Deliver(req, false)
			mustBeOne(t, w.Find(election.MsgVote, "n1", "n2", term+1), "n1's vote")
			w.Crash("n2") // before its next input: the save of its own vote had not ended
			w.Restart("n2")
			if got := w.Term("n2"); got != term {
				t.Fatalf("n2 restarted in term %d, want %d: its unsaved vote survived the crash", got, term)
			}
			w.Restart("n3")
			until(t, w, 2000, "one leader", nil, func() bool { _, ok := w.Agreed(); return ok })
		})
	}
}
