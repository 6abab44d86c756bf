package safety

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	steps     = flag.Int64("safety.steps", 300_000, "simulated steps per algorithm and group size")
	runLen    = flag.Int64("safety.run", 20_000, "steps per randomized run (a fresh site)")
	seed      = flag.Uint64("safety.seed", 0, "first seed (0: from the time)")
	sizes     = flag.String("safety.n", "2,3,4,5,7", "group sizes")
	algs      = flag.String("safety.alg", "bully,ring", "algorithms")
	workers   = flag.Int("safety.workers", 0, "runs in parallel per group size and algorithm (0: one)")
	shrinkFor = flag.Duration("safety.shrink", time.Minute, "how long to shrink a failing run")
	only      = flag.Uint64("safety.only", 0, "run just this seed (with -safety.n and -safety.alg naming one case)")
	swarm     = flag.Bool("safety.swarm", true, "make every odd seed's run a swarm run (RunConfig.Swarm)")
	lateDups  = flag.Bool("safety.replay", true, "let a third of the duplicate faults send again a message delivered long before (RunConfig.Replay)")
	timing    = flag.Bool("safety.timing", true, "let a third of the seeds give the site other timings and quorums, some of them different per member, leases included (RunConfig.Timing, Mixed, Drift)")
)

// runConfig is the run TestCheckSafety makes of a seed: every fault kind,
// witnesses as the seed gives them, a swarm run for odd seeds, and for a
// third of the seeds a site timing other than BaseConfig's.
func runConfig(alg string, n int, seed uint64) RunConfig {
	return RunConfig{N: n, Algorithm: alg, Faults: AllFaults, Seed: seed, Steps: *runLen, Witnesses: true,
		Swarm: *swarm && seed%2 == 1, Timing: *timing, Mixed: *timing, Drift: *timing, Replay: *lateDups}
}

// TestCheckSafety runs the adversarial checker: randomized runs of a
// simulated site with every fault kind on, for each algorithm and group
// size, checking the invariants after every step and that the site agrees
// on one leader soon after the faults stop. A failure prints the seed and a
// shrunk trace. `make test` runs a short budget; `make check-safety` the
// long one (-safety.steps=100000000).
func TestCheckSafety(t *testing.T) {
	first := *seed
	if first == 0 {
		first = uint64(time.Now().UnixNano())
	}
	t.Logf("seeds from %d, %d steps per case, faults %s", first, *steps, AllFaults)
	for _, alg := range strings.Split(*algs, ",") {
		for _, ns := range strings.Split(*sizes, ",") {
			var n int
			if _, err := fmt.Sscan(ns, &n); err != nil {
				t.Fatalf("-safety.n: %v", err)
			}
			t.Run(fmt.Sprintf("%s/n=%d", alg, n), func(t *testing.T) {
				t.Parallel()
				checkCase(t, alg, n, first)
			})
		}
	}
}

func checkCase(t *testing.T, alg string, n int, first uint64) {
	start := time.Now()
	if *only != 0 {
		rc := runConfig(alg, n, *only)
		out, choices := Record(rc)
		if out.Failed() {
			short, trace := Shrink(rc, choices, out, *shrinkFor)
			t.Fatalf("seed %d (n=%d %s, faults %s): %s%s\nshrunk from %d to %d choices; trace:\n%s",
				rc.Seed, n, alg, rc.faults(), out.Violation, out.Liveness, len(choices), len(short), strings.Join(trace, "\n"))
		}
		t.Logf("seed %d (faults %s): %d steps, %d quiet periods, longest wait %d ticks", rc.Seed, rc.faults(), out.Steps, out.Quiet, out.Worst)
		return
	}
	var (
		done    atomic.Int64
		runs    atomic.Int64
		witRuns atomic.Int64
		swarms  atomic.Int64
		quiets  atomic.Int64
		worst   atomic.Int64
		mu      sync.Mutex
		failure *RunConfig
		failOut Outcome
	)
	next := atomic.Uint64{}
	next.Store(first + uint64(n)*1_000_003 + uint64(len(alg))*7)
	par := max(1, *workers)
	var wg sync.WaitGroup
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < *steps {
				mu.Lock()
				stop := failure != nil
				mu.Unlock()
				if stop {
					return
				}
				rc := runConfig(alg, n, next.Add(1))
				out := Run(rc)
				done.Add(out.Steps)
				runs.Add(1)
				if len(witnessesOf(rc.Seed, n)) > 0 {
					witRuns.Add(1)
				}
				if rc.Swarm {
					swarms.Add(1)
				}
				quiets.Add(int64(out.Quiet))
				for {
					old := worst.Load()
					if int64(out.Worst) <= old || worst.CompareAndSwap(old, int64(out.Worst)) {
						break
					}
				}
				if out.Failed() {
					mu.Lock()
					if failure == nil {
						failure, failOut = &rc, out
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%s n=%d: %d steps in %d runs (%d with witnesses, %d swarm runs), %d quiet periods, longest wait for a leader %d ticks, %s",
		alg, n, done.Load(), runs.Load(), witRuns.Load(), swarms.Load(), quiets.Load(), worst.Load(), time.Since(start).Round(time.Millisecond))
	if failure == nil {
		return
	}
	_, choices := Record(*failure)
	short, trace := Shrink(*failure, choices, failOut, *shrinkFor)
	t.Fatalf("seed %d (n=%d %s, faults %s): %s%s\nshrunk from %d to %d choices; trace:\n%s",
		failure.Seed, n, alg, failure.faults(), failOut.Violation, failOut.Liveness, len(choices), len(short), strings.Join(trace, "\n"))
}

// TestFoundSeeds replays runs in which the long checker found a broken
// invariant, each fixed since. A seed gives the same run only as long as the
// checker makes its choices as it does now; election/interleavings_test.go
// holds the hand-driven forms that do not depend on that.
func TestFoundSeeds(t *testing.T) {
	for _, c := range []struct {
		alg       string
		n         int
		seed      uint64
		what      string
		witnesses bool // the run as TestCheckSafety makes it since witnesses exist
		swarm     bool // a swarm run (odd seeds since swarm runs exist)
		timing    bool // the run as TestCheckSafety makes it since timings vary
		mixed     bool // and since members' timings may differ
		drift     bool // and since their leases may differ too
		replay    bool // and since duplicates may come late (RunConfig.Replay)
	}{
		// A candidate whose own connection closed led on an acknowledgement
		// that was on its way (TestCandidateWhoseConnectionClosedDoesNotLead).
		{"ring", 3, 1796173225347800026, "two leases at once", false, false, false, false, false, false},
		// Two members deposed each other's fresh leadership for ever: each
		// stood again at once on an acknowledgement from a later term, which a
		// third member had from voting in the other's round.
		{"ring", 5, 1796174004091669474, "no leader 400 ticks after the faults", false, false, false, false, false, false},
		// Two of four members drained, the one that may stand kept sending
		// its token past a drained member that told it only every other D
		// that it was alive (TestRingDrainedMemberTellsMembersItPresumesDead).
		{"ring", 4, 1796400302808336776, "no leader 400 ticks after the faults", true, false, false, false, false, false},
		// The highest member drained, the next one waiting for it to stand;
		// lower members stood in turn, each refused by the waiting member,
		// and each refusal started its wait over
		// (TestBullyRefusingMemberKeepsItsWait).
		{"bully", 4, 1796403900140611435, "no leader 400 ticks after the faults", true, true, false, false, false, false},
		{"bully", 7, 1796403900143612187, "no leader 400 ticks after the faults", true, true, false, false, false, false},
		// A drained member released by a hand-over whose nominee never stood
		// kept silent until it heard a leader, and a quorum of 3 of 3 needed
		// its vote (TestStaleNominationDoesNotSilenceDrainedMember).
		{"ring", 3, 1796409667678235461, "no leader after the faults", true, true, true, false, false, false},
		// An answer timeout of one tick closed the pre-vote window before
		// the request went out (TestPreVoteAskedWithinShortAnswerTimeout).
		{"bully", 7, 1796409996139666148, "no leader after the faults", true, false, true, false, false, false},
		{"bully", 7, 1796410048846633245, "no leader after the faults", true, true, true, false, false, false},
		// A drained member's announcements came with its election's steps,
		// which its votes and the backoff after them put off past the others'
		// window of D (TestRingDrainedMemberTellsAliveWhileItVotes).
		{"ring", 3, 1796411224258493671, "no leader after the faults", true, true, true, false, false, false},
		// A member that asked for pre-votes and refused a lower candidate
		// went back to waiting for the ranks above; lower members standing
		// more often than it got through those waits ended each of its
		// rounds (TestBullyRefusingPreVoterAsksAgain).
		{"bully", 7, 1796413284687419018, "no leader after the faults", true, false, true, true, false, false},
		// A leader's lease, longer than another member's D allowed (each
		// gateway's timing valid on its own), counted that member's
		// acknowledgement past the moment it voted for the next leader
		// (TestLeaseShortenedByShortPromise).
		{"ring", 5, 1796420243367902483, "two leases at once", true, true, true, true, true, false},
		{"bully", 5, 1796420243367902483, "two leases at once", true, true, true, true, true, false},
		// A drained member still believed the members above the lowest one
		// drained (their acknowledgements had said so before they were
		// undrained), waited for the lowest one's rounds, which died
		// elsewhere, and marked it dead on each silence; every round then
		// skipped it, and quorum 5 of 5 was never reached
		// (election TestStandingClearsDrainedKnowledge).
		{"ring", 5, 1796421529550718659, "no leader after the faults", true, true, true, true, true, false},
		// A drained member whose D (80 ticks) was longer than the other's (30)
		// told it every D/2 of its own that it was alive, by a clock running
		// slow; the other stood in step, each time unheard from it for longer
		// than its D, skipped it, and a quorum of 2 of 2 was never reached
		// (election TestRingDrainedMemberTellsAliveWhileItVotes).
		{"ring", 2, 1796431074075811228, "no leader after the faults", true, false, true, true, true, false},
		// A candidate overtaken right after its announcement withdrew, but the
		// members that had acknowledged the announcement ignored the
		// WITHDRAW and kept its tokens back for D; a voter with a short
		// answer timeout gave up on the round meanwhile, voted in a lower
		// member's round in a higher term, and its acknowledgement deposed
		// the next winner: every 59 ticks for ever (election
		// TestWithdrawFreesMemberThatTookAnnouncementForLeader).
		{"ring", 5, 1796433496225374437, "no leader after the faults", true, true, true, true, true, false},
		// The same, with one timing for all (faults delay, crash, route):
		// three members kept backing a candidate that had withdrawn.
		{"ring", 5, 1796447043189809595, "no leader 400 ticks after the faults", true, true, true, true, true, false},
		// Quorums of every member: a member whose own rounds died at a
		// higher candidate's voters was marked dead by the members below
		// when their waits for it ended, and every round passed it over
		// while it was up (election TestRingRoundTriesPresumedDeadWhenEveryVoteCounts).
		{"ring", 7, 1796414052463188429, "no leader after the faults", true, true, true, true, true, false},
		{"ring", 5, 1796447608688341056, "no leader after the faults", true, false, true, true, true, false},
		// Two leases at once: a member released by a route closure asked for
		// pre-votes, then voted for the candidate's repeated COORDINATOR
		// (backing it again, its win counting that vote), and a pre-vote
		// grant that came after made it stand in the next term at once
		// (election TestBackingAgainEndsPreVote).
		{"bully", 3, 1796447608686342610, "two leases at once", true, false, true, true, true, false},
	} {
		t.Run(fmt.Sprintf("%s/n=%d/%d", c.alg, c.n, c.seed), func(t *testing.T) {
			out := Run(RunConfig{N: c.n, Algorithm: c.alg, Faults: AllFaults, Seed: c.seed, Steps: *runLen, Witnesses: c.witnesses, Swarm: c.swarm, Timing: c.timing, Mixed: c.mixed, Drift: c.drift, Replay: c.replay})
			if out.Failed() {
				t.Fatalf("%s again: %s%s", c.what, out.Violation, out.Liveness)
			}
		})
	}
}

// TestSwarmFaults checks the swarm runs' fault mixes: never empty, never a
// kind that was not allowed, the same for the same seed, and every allowed
// kind both used and left out across seeds (a mix that always kept one kind
// would not be a swarm).
func TestSwarmFaults(t *testing.T) {
	allowed := AllFaults &^ FaultSkew
	on := map[Fault]int{}
	full := 0
	const seeds = 2000
	for s := uint64(1); s <= seeds; s++ {
		f := SwarmFaults(s, allowed)
		if f == 0 || f&^allowed != 0 {
			t.Fatalf("seed %d: %s out of %s", s, f, allowed)
		}
		if g := SwarmFaults(s, allowed); g != f {
			t.Fatalf("seed %d: %s, then %s", s, f, g)
		}
		if f == allowed {
			full++
		}
		for i := range faultNames {
			if k := Fault(1) << i; f&k != 0 {
				on[k]++
			}
		}
	}
	for i, name := range faultNames {
		k := Fault(1) << i
		if allowed&k == 0 {
			if on[k] != 0 {
				t.Errorf("%s: used in %d runs, not allowed", name, on[k])
			}
			continue
		}
		// A fair coin: 1000 of 2000 expected, 6 standard deviations either side.
		if on[k] < 865 || on[k] > 1135 {
			t.Errorf("%s: used in %d of %d runs", name, on[k], seeds)
		}
	}
	if full == seeds {
		t.Errorf("every run used every kind")
	}
	if f := SwarmFaults(7, FaultCrash); f != FaultCrash {
		t.Errorf("one allowed kind: %s", f)
	}
	if f := SwarmFaults(7, 0); f != 0 {
		t.Errorf("no allowed kind: %s", f)
	}
}

// TestReplayOfNoChoices: Shrink may remove every choice of a failing run, and
// the replay of none must run (every choice reads as 0) rather than draw from
// a generator a replay does not have: a 100M-step make check-safety lost a
// Ring failure to that panic while shrinking it.
func TestReplayOfNoChoices(t *testing.T) {
	rc := runConfig("ring", 3, 1)
	rc.Steps = 200
	for _, cs := range [][]uint32{nil, {}} {
		out := replay(rc, cs, nil)
		if out.Choices != 0 {
			t.Errorf("replay of %v made %d choices, want 0", cs, out.Choices)
		}
	}
}

// TestReplaySendsDeliveredMessageAgain: Replay puts a copy of a message
// delivered before back in flight, as a new message after the others, and
// nothing before any delivery.
func TestReplaySendsDeliveredMessageAgain(t *testing.T) {
	w := New(Options{N: 3, Algorithm: "bully", Fail: func(msg string) { t.Fatal(msg) }})
	w.Replay(0)
	if len(w.Flight) != 0 {
		t.Fatalf("a replay before any delivery put %d messages in flight", len(w.Flight))
	}
	for len(w.Flight) == 0 {
		w.Ticks(1)
	}
	first := *w.Flight[0]
	w.Deliver(w.Flight[0], false)
	w.Replay(0)
	last := w.Flight[len(w.Flight)-1]
	if last.ID == first.ID || last.M.Type != first.M.Type || last.M.From != first.M.From || last.To != first.To ||
		last.M.Term != first.M.Term || last.M.Seq != first.M.Seq {
		t.Fatalf("replayed %s, want a new copy of %s", last, &first)
	}
	// Any index picks a delivered message, a negative one too.
	for len(w.Flight) < 2 {
		w.Ticks(1)
	}
	w.Deliver(w.Flight[0], false)
	before := len(w.Flight)
	w.Replay(-7)
	if len(w.Flight) != before+1 {
		t.Fatalf("Replay(-7) put %d messages in flight, want 1", len(w.Flight)-before)
	}
}

// TestRunsCrashCandidatesBeforeTheirSave: the randomized runs reach the
// window that Ready.SendFirst opens, a candidate crashed after its request
// left and before its own vote was saved, and go on checking the site from
// there. Without it the checker would not attack the early send at all.
func TestRunsCrashCandidatesBeforeTheirSave(t *testing.T) {
	hits, runs := 0, 0
	for s := uint64(1); s <= 40 && hits == 0; s++ {
		for _, alg := range []string{"bully", "ring"} {
			rc := runConfig(alg, 3, s)
			rc.Steps = 20_000
			c := &chooser{rng: rand.New(rand.NewPCG(rc.Seed, rc.Seed^0x9e3779b97f4a7c15))}
			out := run(rc, c, func(l string) {
				if strings.Contains(l, " before saving ") {
					hits++
				}
			})
			runs++
			if out.Failed() {
				t.Fatalf("%s seed %d: %s%s", alg, s, out.Violation, out.Liveness)
			}
		}
	}
	t.Logf("%d crashes before a save in %d runs of 20,000 steps", hits, runs)
	if hits == 0 {
		t.Fatal("no run of 40 seeds crashed a candidate before it saved its own vote")
	}
}
