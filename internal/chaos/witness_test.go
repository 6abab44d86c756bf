package chaos

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/journalcheck"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// witID is the witness of the 2+1 site.
const witID = "wit"

// witnessMembers is the 2+1 site's --members. By default the witness ranks
// highest (priority 3), the case that costs most if any member forgot that
// it never stands: a Bully member would wait answer_timeout for the highest
// member to proclaim, and a Ring would expect it to start the round.
// CHAOS_WITNESS_RANK=lowest ranks it below both gateways (priority 0 is
// not a valid priority, so the gateways move up).
func witnessMembers(t *testing.T) string {
	switch r := os.Getenv("CHAOS_WITNESS_RANK"); r {
	case "", "highest":
		return "gw1=1,gw2=2," + witID + "=3"
	case "lowest":
		return "gw1=2,gw2=3," + witID + "=1"
	default:
		t.Fatalf("CHAOS_WITNESS_RANK=%q: want highest or lowest", r)
		return ""
	}
}

// newWitnessWorld starts a 2+1 site: gateways gw1 and gw2 and the witness
// wit (--witnesses wit), each agent on its own in-process nats-server behind
// its own NATS-mode fault proxy, the three servers clustered in a full mesh
// whose every route runs through a raw route proxy (Mesh). Cutting the
// gw1-gw2 route separates the gateways while both still reach the witness.
func newWitnessWorld(t *testing.T, tm timing) *world {
	t.Helper()
	bin := agentBinary(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", v, err)
		}
		seed = s
	}
	dir, err := os.MkdirTemp("", "edge-agent-chaos-witness-")
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, tm: tm, dir: dir, proxies: map[string]*Proxy{}, seed: seed,
		rng: rand.New(rand.NewPCG(seed, seed+1)), stalls: newStallWatch()}
	members := witnessMembers(t)
	t.Logf("seed %d (CHAOS_SEED reproduces the fault schedule, not the timing), %s, members %s, logs and journals in %s", seed, tm, members, dir)
	w.log, err = os.Create(filepath.Join(dir, "agents.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	w.mesh, err = NewMesh(seed, "gw1", "gw2", witID)
	if err != nil {
		t.Fatal(err)
	}
	args := append(tm.args(), "--witnesses", witID)
	args = append(args, strings.Fields(os.Getenv("CHAOS_AGENT_ARGS"))...)
	w.site = harness.NewSite(bin, "", dir, 0, args...)
	w.site.Members = members
	w.site.Journals = true
	w.site.Log = w.log
	urls := map[string]string{}
	w.site.MemberArgs = func(id string) []string { return []string{"--nats-url", urls[id]} }
	w.ids = w.site.IDs()
	for i, id := range w.ids {
		p, err := NewProxy(ProxyConfig{Name: id, Target: w.mesh.Server(id).ClientAddr(), Mode: NATS, Seed: seed + uint64(i) + 2})
		if err != nil {
			t.Fatal(err)
		}
		w.proxies[id] = p
		urls[id] = p.URL()
	}
	if err := w.site.StartAll(); err != nil {
		t.Fatal(err)
	}
	return w
}

// witFault is one fault of a 2+1 scenario.
type witFault struct {
	kind       string
	isolated   map[string]bool // agents whose link is faulted
	split      bool            // the gw1-gw2 route is cut or black-holed
	witDown    bool            // the witness process is killed for the hold
	applyAt    time.Time       // just before the fault was applied
	cutAt      time.Time       // once it was in place (a killed process's exit awaited)
	healAt     time.Time
	hold       time.Duration
	before     harness.Agreement // the leader (by /status) just before the fault
	after      harness.Agreement
	samples    int // /status polls of every agent during the hold
	twoLeaders int // polls in which both gateways said they lead
}

// reach reports whether agents a and b exchange messages both ways under f.
func (f *witFault) reach(a, b string) bool {
	if f.isolated[a] || f.isolated[b] || (f.witDown && (a == witID || b == witID)) {
		return false
	}
	return !(f.split && a != witID && b != witID)
}

// keepsQuorum reports whether id reaches a quorum (2 of 3, itself
// included) under f.
func (f *witFault) keepsQuorum(id string, ids []string) bool {
	n := 0
	for _, o := range ids {
		if o == id || f.reach(id, o) {
			n++
		}
	}
	return n >= len(ids)/2+1
}

// witHold picks how long a fault lasts: a fifth are blips shorter than
// L + H, most last from D + H to 2.5 s, and some 3 to 7 s, long enough for
// the servers' pings to give up on a black-holed route or link.
func (w *world) witHold(r *rand.Rand) time.Duration {
	switch x := r.IntN(20); {
	case x < 4:
		return between(r, w.tm.H/2, w.tm.L()+w.tm.H)
	case x < 17:
		return between(r, w.tm.D()+w.tm.H, 2500*time.Millisecond)
	default:
		return between(r, 3*time.Second, 7*time.Second)
	}
}

// watch holds the fault until its time is up, polling every agent's
// /status every 20 ms: the witness must never lead, stand or be named
// leader (the test fails at once); polls in which both gateways say they
// lead are counted (the journals decide whether leases overlapped).
func (w *world) watch(f *witFault) {
	w.t.Helper()
	end := f.cutAt.Add(f.hold)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(end) {
		leading := 0
		for _, id := range w.site.Running() {
			st, err := w.status(id)
			if err != nil {
				continue // its HTTP answer is slow; the journal still tells
			}
			if st.Leader == witID || (id == witID && st.Role != "follower") {
				w.t.Fatalf("during %s: %s reports leader %q, role %s: the witness leads or stands", f.kind, id, st.Leader, st.Role)
			}
			if id != witID && st.Role == "leader" {
				leading++
			}
		}
		f.samples++
		if leading > 1 {
			f.twoLeaders++
		}
		select {
		case <-tick.C:
		case <-time.After(time.Until(end)):
		}
	}
}

// witnessRun is what a 2+1 scenario measured over its cycles.
type witnessRun struct {
	faults                          []*witFault
	recovery, fromHeal, bus, rejoin samples
	late                            []string
	kinds                           map[string]int
}

// cycles runs n fault/heal cycles over the 2+1 site: wait for an agreed
// leader (a gateway), apply the fault pick chooses, hold it while watching
// the agents, heal, and wait for one leader again.
func (w *world) witnessCycles(n int, pick func(i int, r *rand.Rand, leader string) (*witFault, func(), func())) *witnessRun {
	t := w.t
	t.Helper()
	run := &witnessRun{kinds: map[string]int{}}
	for i := 0; i < n; i++ {
		// Each fault starts with all three members back: a gateway
		// still reconnecting after the last cycle's cut (it reported
		// the leader it backed all along) made a witness fault one
		// of two members away, and the leader lost its lease "while
		// only the witness was away" (CI, 2026-12-05: gw1 reconnected
		// 148 ms into the next cycle, a witness-killed one).
		if err := w.allConnected(30 * time.Second); err != nil {
			t.Fatalf("cycle %d: before the fault: %v", i, err)
		}
		a, err := w.agree(w.ids, "", 0, 30*time.Second)
		for try := 0; err == nil; try++ {
			fresh, waited := w.freshLease(a.Leader)
			if fresh && !waited {
				break
			}
			if try == 10 {
				t.Logf("cycle %d: %s leads term %d without a fresh lease after %d tries; the fault begins anyway", i, a.Leader, a.Term, try)
				break
			}
			a, err = w.agree(w.ids, "", 0, 30*time.Second)
		}
		if err != nil {
			t.Fatalf("cycle %d: before the fault: %v", i, err)
		}
		if a.Leader == witID {
			t.Fatalf("cycle %d: the witness leads term %d", i, a.Term)
		}
		f, apply, heal := pick(i, w.rng, a.Leader)
		f.before = a
		f.hold = w.witHold(w.rng)
		f.applyAt = time.Now()
		apply()
		// Taken after the fault is in place, so that step-down times
		// measured from it are never flattered.
		f.cutAt = time.Now()
		w.watch(f)
		f.healAt = time.Now()
		heal()
		whole := f.healAt
		if f.split && !w.mesh.Routed() {
			if err := w.mesh.WaitRouted(10 * time.Second); err != nil {
				t.Fatalf("cycle %d (%s): %v", i, f.kind, err)
			}
			whole = time.Now()
			run.bus = append(run.bus, whole.Sub(f.healAt))
		}
		if f.witDown {
			whole = time.Now() // the witness is back (heal restarted it)
		}
		c, err := w.agreeConnected(30 * time.Second)
		if err != nil {
			t.Fatalf("cycle %d (%s, held %s): after the heal: %v", i, f.kind, f.hold, err)
		}
		a, err = w.agree(w.ids, "", 0, 30*time.Second)
		if err != nil {
			t.Fatalf("cycle %d (%s, held %s): after the heal: %v", i, f.kind, f.hold, err)
		}
		if a.Leader == witID || c.Leader == witID {
			t.Fatalf("cycle %d (%s): the witness leads after the heal", i, f.kind)
		}
		f.after = a
		rec := c.At.Sub(whole)
		run.recovery = append(run.recovery, rec)
		run.fromHeal = append(run.fromHeal, c.At.Sub(f.healAt))
		run.rejoin = append(run.rejoin, a.At.Sub(whole))
		if rec > w.tm.D()+time.Second {
			run.late = append(run.late, fmt.Sprintf("cycle %d %s held %s: %s (machine stall up to %s meanwhile)",
				i, f.kind, f.hold.Round(time.Millisecond), ms(rec), ms(w.stalls.worst(whole, a.At))))
		}
		run.faults = append(run.faults, f)
		run.kinds[f.kind]++
		t.Logf("cycle %3d at %s: %-24s held %7s leader %s term %d -> %s term %d, recovered in %s",
			i, f.cutAt.Format("15:04:05.000"), f.kind, f.hold.Round(time.Millisecond), f.before.Leader, f.before.Term, a.Leader, a.Term, ms(rec))
		w.alive()
	}
	return run
}

// freshLease waits (up to 2 s) until leader leads with a lease renewed
// since the last fault: fresh, unless the wait ran out; waited, if it was
// not so at once (the agreement may then be stale: take it again). A fault
// shorter than the lease leaves the leader leading on an acknowledgement
// from before it; a fault begun before the next renewal carried the end of
// the last one into it (a lease lost "while only the witness was away" 25 ms
// after a 145 ms cut of the leader had run it down; on 2026-12-06, 1.2 ms
// before a killed witness's exit was seen, after a 158 ms drop of what the
// leader received: its lease had run out while the others still named it,
// and it no longer said it led). A lease renewed each heartbeat has more than
// L - H - a tick left; one that has less was not renewed lately.
func (w *world) freshLease(leader string) (fresh, waited bool) {
	tm := w.tm
	floor := (tm.L() - tm.H - tm.H/agent.TicksPerHeartbeat).Milliseconds()
	err := poll.Every(5*time.Millisecond, 2*time.Second, "the leader's lease renewed", func() (bool, string) {
		st, err := w.status(leader)
		switch {
		case err != nil:
			waited = true
			return false, err.Error()
		case st.Role != "leader" || st.LeaseRemainingMS < floor:
			waited = true
			return false, fmt.Sprintf("%s is %s with %d ms of lease left", leader, st.Role, st.LeaseRemainingMS)
		}
		return true, ""
	})
	return err == nil, waited
}

// witnessLeases fails the test for any lease interval or "lead" line of
// the witness, and returns how many there were.
func witnessLeases(t *testing.T, rep *journalcheck.Report, es []agent.JournalEntry) int {
	t.Helper()
	n := 0
	for _, iv := range rep.Intervals {
		if iv.ID == witID {
			n++
			t.Errorf("the witness held a lease in term %d from %s to %s", iv.Term,
				time.Unix(0, iv.Start).Format("15:04:05.000"), time.Unix(0, iv.End).Format("15:04:05.000"))
		}
	}
	for _, e := range es {
		if e.ID == witID && (e.Event == "lead" || e.Event == "renew") {
			n++
			t.Errorf("the witness journaled %q in term %d", e.Event, e.Term)
		}
	}
	return n
}

// stepDowns measures, for every fault that left the leader at the cut
// without a quorum for at least L + H, the end of its lease and its stop
// line after the fault, as TestChaosPartitions does; it also counts the
// faults that left the leader a quorum for longer than L + H (keptOf) and
// in how many it still held its lease at the heal (kept).
func (w *world) stepDowns(run *witnessRun, rep *journalcheck.Report, es []agent.JournalEntry) (leaseEnd, stopped samples, slow, excused []string, kept, keptOf int) {
	tm := w.tm
	for i, f := range run.faults {
		iv, ok := leaseAt(rep, f.cutAt)
		if !ok {
			continue // no lease at the cut (a hand-over was under way)
		}
		if f.keepsQuorum(iv.ID, w.ids) {
			if f.hold > tm.L()+tm.H {
				keptOf++
				if iv.End > f.healAt.UnixNano() {
					kept++
				}
			}
			continue
		}
		if f.hold < tm.L()+tm.H {
			continue
		}
		d := time.Duration(iv.End - f.cutAt.UnixNano())
		leaseEnd = append(leaseEnd, d)
		st, ok := stopAfter(es, iv.ID, iv.Term, time.Unix(0, iv.Start))
		if !ok {
			slow = append(slow, fmt.Sprintf("cycle %d %s: %s never logged a stop of term %d", i, f.kind, iv.ID, iv.Term))
			continue
		}
		ds := time.Duration(st.T - f.cutAt.UnixNano())
		stopped = append(stopped, ds)
		what := fmt.Sprintf("cycle %d %s: %s lease ended %s and stopped %s (%s) after the fault",
			i, f.kind, iv.ID, ms(d), ms(ds), st.Reason)
		switch stall := w.stalls.worst(f.cutAt, time.Unix(0, st.T)); {
		case d > tm.L()+tm.H:
			slow = append(slow, what)
		case ds > tm.L()+tm.H && stall >= 100*time.Millisecond:
			excused = append(excused, fmt.Sprintf("%s; machine stall of %s meanwhile", what, ms(stall)))
		case ds > tm.L()+tm.H:
			slow = append(slow, what)
		}
	}
	return
}

// handedOver reports whether the lease iv ended, before the heal, with a
// "stop" line saying that its leader handed over on purpose.
func handedOver(es []agent.JournalEntry, iv journalcheck.Interval, heal time.Time) bool {
	st, ok := stopAfter(es, iv.ID, iv.Term, time.Unix(0, iv.Start))
	return ok && st.T <= heal.UnixNano() && st.Reason == "handing over"
}

// What became of the leader's lease over a fault of the witness alone.
const (
	witKept        = iota // kept through the fault, and the same leader and term after it
	witHandedAfter        // kept through the fault; handed over on purpose between the heal and the agreement
	witChanged            // kept through the fault, yet another leader or term after it: a failure
	witHanded             // handed over on purpose during the fault (Bully's hold-down preemption)
	witLostBefore         // no lease was held when the fault was applied: the previous cycle's fault took it
	witLost               // lost during the fault: a failure, unless the machine stalled
)

// witnessFaultOutcome classifies fault f of the witness from the leases of
// the journals: what became of the lease held when the fault was applied
// (whoever held it; the agreement before the fault names the leader the
// agents polled). A leader's lease outlives a fault of its link by at most
// L - H, so a fault that begins right after the heal of one near that long
// can find no lease at all (freshLease now waits for one): that is not the
// witness's doing. A lease that ends after the fault was applied, even
// before a killed witness's exit was seen, is lost with the witness away.
func witnessFaultOutcome(rep *journalcheck.Report, es []agent.JournalEntry, f *witFault) int {
	iv, ok := leaseAt(rep, f.applyAt)
	switch {
	case !ok:
		return witLostBefore
	case iv.End >= f.healAt.UnixNano():
		switch {
		case f.after.Leader == iv.ID && f.after.Term == iv.Term:
			return witKept
		case handedOver(es, iv, f.after.At):
			return witHandedAfter
		}
		return witChanged
	case handedOver(es, iv, f.healAt):
		// A planned hand-over (Bully's hold-down preemption back to the
		// higher gateway, which had just returned from an earlier fault):
		// the leader stopped on purpose, not for lack of acknowledgements.
		return witHanded
	}
	return witLost
}

// deposed counts heals after which another term led than the one whose
// lease was valid at the heal.
func deposed(run *witnessRun, rep *journalcheck.Report) int {
	n := 0
	for _, f := range run.faults {
		if iv, ok := leaseAt(rep, f.healAt); ok && f.after.Term != iv.Term {
			n++
		}
	}
	return n
}

func (run *witnessRun) faultKinds() string {
	var ks []string
	for k, n := range run.kinds {
		ks = append(ks, fmt.Sprintf("%s:%d", k, n))
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// lateHeals fails the test when more heals than CHAOS_RECOVERY_MISSES were
// not followed by one leader within D + 1 s, and lists them either way.
func (w *world) lateHeals(run *witnessRun) {
	t := w.t
	t.Helper()
	allowed := harness.EnvCount(t, "CHAOS_RECOVERY_MISSES", 0)
	if len(run.late) == 0 {
		return
	}
	msg := fmt.Sprintf("%d heals not followed by one leader within D+1s = %s:\n%s", len(run.late), w.tm.D()+time.Second, strings.Join(run.late, "\n"))
	if len(run.late) > allowed {
		t.Error(msg)
	} else {
		t.Logf("%s\n(within CHAOS_RECOVERY_MISSES=%d)", msg, allowed)
	}
}

// TestChaosWitnessGatewayCut runs CHAOS_WITNESS_CYCLES cuts of the route
// between the two gateways' servers of a 2+1 site (gw1, gw2 and the witness
// wit, each on its own server, the three clustered in a full mesh of
// proxied routes), alternately a reset (Cut) and a black hole, each held
// for a random time (a fifth shorter than L + H, the rest longer than D).
// Both gateways still reach the witness, so the witness's vote decides: the
// leader keeps it (it hears the leader's heartbeats and refuses the other
// gateway's pre-vote), and the other gateway must not lead.
//
// Checked from the agents' journals: no overlapping leases, no double vote,
// no split term, no term regression; the witness never holds a lease (and,
// on every /status poll during the cut, never leads, stands or is named
// leader); for every cut held at least D + 1 s, exactly one gateway leads
// once the cut settled: leases never overlap, a gateway holds one at the
// heal, no leaderless span in the cut lasts more than D + 1 s, and a span
// after the first lease of the cut (a lapse: the leader lost the witness's
// acknowledgements although both still reach each other) fails the test
// beyond CHAOS_WITNESS_LAPSES (0 unless set; each is listed with the
// machine stall seen meanwhile); after each heal one leader within D + 1 s
// (CHAOS_RECOVERY_MISSES heals may miss it, each listed). Figures as
// TestChaosPartitions's, plus settle (cut to the first lease after it: 0
// when the leader kept its lease), lapse, leader_kept_through_cut and
// leases_begun_during_cuts.
func TestChaosWitnessGatewayCut(t *testing.T) {
	requireChaos(t)
	start := time.Now()
	n := harness.EnvCount(t, "CHAOS_WITNESS_CYCLES", 10)
	w := newWitnessWorld(t, defaultTiming(t))
	tm := w.tm
	route := w.mesh.Route("gw1", "gw2")
	run := w.witnessCycles(n, func(i int, r *rand.Rand, leader string) (*witFault, func(), func()) {
		f := &witFault{isolated: map[string]bool{}, split: true}
		apply := route.Cut
		f.kind = "gw-route-cut"
		if i%2 == 1 {
			apply, f.kind = route.BlackHole, "gw-route-blackhole"
		}
		return f, apply, w.healAll
	})

	rep, es := w.journals()
	requireSafe(t, rep)
	witLeases := witnessLeases(t, rep, es)
	var settle, lapse samples
	var lapses []string
	kept, settledOf, begun, twoLeaderPolls, polls := 0, 0, 0, 0, 0
	for i, f := range run.faults {
		twoLeaderPolls += f.twoLeaders
		polls += f.samples
		// The leader at the cut kept its lease through it, or not.
		if iv, ok := leaseAt(rep, f.cutAt); ok && iv.ID == f.before.Leader && iv.End >= f.healAt.UnixNano() {
			kept++
		}
		for _, iv := range rep.Intervals {
			if iv.Start >= f.cutAt.UnixNano() && iv.Start < f.healAt.UnixNano() {
				begun++
			}
		}
		if f.hold < tm.D()+time.Second {
			continue
		}
		// Once the cut settled, one gateway leads until the heal: the
		// first leaderless gap (from the cut, when the leader did not keep
		// its lease) ends within D + 1 s; a later gap is a lapse, and must
		// end within D + 1 s too; a gateway leads at the heal. Leases never
		// overlap (requireSafe), so at most one leads at any time.
		settledOf++
		gaps := leaderlessGaps(rep, f.cutAt, f.healAt)
		s := time.Duration(0)
		for j, g := range gaps {
			what := fmt.Sprintf("cycle %d %s held %s: no gateway held a lease from %s to %s after the cut (%s; machine stall up to %s meanwhile)",
				i, f.kind, f.hold.Round(time.Millisecond), ms(g[0]), ms(g[1]), ms(g[1]-g[0]), ms(w.stalls.worst(f.cutAt.Add(g[0]), f.cutAt.Add(g[1]))))
			switch {
			case g[1]-g[0] > tm.D()+time.Second || g[1] >= f.healAt.Sub(f.cutAt):
				t.Errorf("%s: longer than D+1s, or still at the heal", what)
			case j == 0 && g[0] == 0:
				s = g[1]
			default:
				lapses = append(lapses, what)
				lapse = append(lapse, g[1]-g[0])
			}
		}
		settle = append(settle, s)
	}
	leaseEnd, stopped, slow, excused, keptQ, keptQOf := w.stepDowns(run, rep, es)
	summary(t, "witness-gateway-cut", w, start,
		fmt.Sprintf("cycles=%d rank=%s", n, witnessRank()), safety(rep), fmt.Sprintf("witness_leases=%d", witLeases),
		run.recovery.p50max("recovery"), fmt.Sprintf("recovery_over_D+1s=%d", len(run.late)),
		run.fromHeal.p50max("recovery_from_heal"), run.bus.p50max("bus_reform"), run.rejoin.p50max("all_three_rejoined"),
		settle.p50max("settle"), lapse.p50max("lapse"), fmt.Sprintf("leader_kept_through_cut=%d/%d leases_begun_during_cuts=%d", kept, len(run.faults), begun),
		fmt.Sprintf("status_polls_two_gateways_leading=%d/%d", twoLeaderPolls, polls),
		leaseEnd.p50max("stepdown_lease"), stopped.p50max("stepdown_stop"),
		fmt.Sprintf("stepdown_over_L+H=%d stop_late_in_machine_stall=%d", len(slow), len(excused)),
		fmt.Sprintf("majority_leader_kept=%d/%d", keptQ, keptQOf),
		fmt.Sprintf("deposed_by_heal=%d", deposed(run, rep)), fmt.Sprintf("implicit_routes_refused=%d", w.mesh.ImplicitRefused()),
		"faults="+run.faultKinds())
	w.lateHeals(run)
	if len(lapses) > 0 {
		// Allowed lapses: 0 in make chaos; make chaos-short allows a few on
		// a shared machine, listed either way.
		msg := fmt.Sprintf("%d cuts in which the one leader lost its lease after the cut had settled:\n%s", len(lapses), strings.Join(lapses, "\n"))
		if allowed := harness.EnvCount(t, "CHAOS_WITNESS_LAPSES", 0); len(lapses) > allowed {
			t.Error(msg)
		} else {
			t.Logf("%s\n(within CHAOS_WITNESS_LAPSES=%d)", msg, allowed)
		}
	}
	if len(slow) > 0 {
		t.Errorf("%d leaders without a quorum did not step down within L+H = %s:\n%s", len(slow), tm.L()+tm.H, strings.Join(slow, "\n"))
	}
}

// leaderlessGaps returns the spans of [from, to) that no lease covers, as
// offsets from from.
func leaderlessGaps(rep *journalcheck.Report, from, to time.Time) [][2]time.Duration {
	ivs := slices.Clone(rep.Intervals)
	slices.SortFunc(ivs, func(a, b journalcheck.Interval) int { return cmp.Compare(a.Start, b.Start) })
	var gaps [][2]time.Duration
	cur, end := from.UnixNano(), to.UnixNano()
	for _, iv := range ivs {
		if iv.End <= cur || iv.Start >= end {
			continue
		}
		if iv.Start > cur {
			gaps = append(gaps, [2]time.Duration{time.Duration(cur - from.UnixNano()), time.Duration(iv.Start - from.UnixNano())})
		}
		cur = max(cur, iv.End)
	}
	if cur < end {
		gaps = append(gaps, [2]time.Duration{time.Duration(cur - from.UnixNano()), time.Duration(end - from.UnixNano())})
	}
	return gaps
}

func witnessRank() string {
	if r := os.Getenv("CHAOS_WITNESS_RANK"); r != "" {
		return r
	}
	return "highest"
}

// TestChaosWitnessPartitions runs CHAOS_WITNESS_CYCLES random faults of
// the partition scenario's kinds that exist on a 2+1 site: the leading
// gateway's link to its server (cut, black hole, one way either way, all of
// its messages dropped either way; it loses its quorum, the other gateway
// leads on the witness's vote), the other gateway's link, the witness's link,
// and the witness killed (SIGKILL) and restarted after the hold.
//
// Checked: no overlapping leases, no double vote, no split term, no term
// regression; the witness never holds a lease, leads, stands or is named
// leader; a leader that lost its quorum for at least L + H steps down
// within L + H; with the witness down or cut off the leading gateway keeps
// its lease through the fault, unless it hands over on purpose (Bully's
// hold-down preemption, counted as handed_over; a lapse is excused, and
// listed, only when the machine was seen to stall for 100 ms or more
// meanwhile, or when no lease was held at all as the fault was applied,
// counted as lost_before_fault: see witnessFaultOutcome), and the
// witness's restart changes neither leader nor term; after each heal one
// leader within D + 1 s (CHAOS_RECOVERY_MISSES may miss it, each listed).
func TestChaosWitnessPartitions(t *testing.T) {
	requireChaos(t)
	start := time.Now()
	n := harness.EnvCount(t, "CHAOS_WITNESS_CYCLES", 10)
	w := newWitnessWorld(t, defaultTiming(t))
	tm := w.tm
	run := w.witnessCycles(n, func(i int, r *rand.Rand, leader string) (*witFault, func(), func()) {
		f := &witFault{isolated: map[string]bool{}}
		other := "gw1"
		if leader == "gw1" {
			other = "gw2"
		}
		lf := pick(r, linkFaults)
		switch x := r.IntN(10); {
		case x < 4:
			f.kind, f.isolated[leader] = "leader-"+lf.name, true
			return f, func() { lf.apply(w.proxies[leader]) }, w.healAll
		case x < 6:
			f.kind, f.isolated[other] = "follower-"+lf.name, true
			return f, func() { lf.apply(w.proxies[other]) }, w.healAll
		case x < 8:
			f.kind, f.isolated[witID] = "witness-"+lf.name, true
			return f, func() { lf.apply(w.proxies[witID]) }, w.healAll
		default:
			f.kind, f.witDown = "witness-killed", true
			return f, func() {
					if err := w.site.Kill(witID); err != nil {
						t.Fatal(err)
					}
				}, func() {
					if _, err := w.site.Start(witID); err != nil {
						t.Fatal(err)
					}
				}
		}
	})

	rep, es := w.journals()
	requireSafe(t, rep)
	witLeases := witnessLeases(t, rep, es)
	// With the witness down or cut off, the leading gateway keeps leading,
	// and the witness's return changes nothing.
	var lost, lostInStall, lostBefore []string
	witFaults, changed, handed, handedAfter := 0, 0, 0, 0
	for i, f := range run.faults {
		if !f.witDown && !f.isolated[witID] {
			continue
		}
		witFaults++
		what := fmt.Sprintf("cycle %d %s held %s: %s (term %d)", i, f.kind, f.hold.Round(time.Millisecond), f.before.Leader, f.before.Term)
		switch stall := w.stalls.worst(f.cutAt, f.healAt); witnessFaultOutcome(rep, es, f) {
		case witKept:
		case witHandedAfter:
			handedAfter++
		case witChanged:
			changed++
			t.Errorf("%s kept its lease through the fault, but after the heal %s leads term %d", what, f.after.Leader, f.after.Term)
		case witHanded:
			handed++
		case witLostBefore:
			lostBefore = append(lostBefore, what+": no lease was held when the fault was applied")
		default:
			if stall >= 100*time.Millisecond {
				lostInStall = append(lostInStall, fmt.Sprintf("%s lost its lease during the fault; machine stall of %s meanwhile", what, ms(stall)))
			} else {
				lost = append(lost, what+" lost its lease during the fault")
			}
		}
	}
	leaseEnd, stopped, slow, excused, kept, keptOf := w.stepDowns(run, rep, es)
	summary(t, "witness-partitions", w, start,
		fmt.Sprintf("cycles=%d rank=%s", n, witnessRank()), safety(rep), fmt.Sprintf("witness_leases=%d", witLeases),
		run.recovery.p50max("recovery"), fmt.Sprintf("recovery_over_D+1s=%d", len(run.late)),
		run.fromHeal.p50max("recovery_from_heal"), run.rejoin.p50max("all_three_rejoined"),
		leaseEnd.p50max("stepdown_lease"), stopped.p50max("stepdown_stop"),
		fmt.Sprintf("stepdown_over_L+H=%d stop_late_in_machine_stall=%d", len(slow), len(excused)),
		fmt.Sprintf("majority_leader_kept=%d/%d", kept, keptOf),
		fmt.Sprintf("leader_kept_witness_faults=%d/%d handed_over=%d lost_in_machine_stall=%d lost_before_fault=%d changed_by_witness_return=%d handed_over_after_heal=%d",
			witFaults-len(lost)-len(lostInStall)-len(lostBefore)-handed, witFaults, handed, len(lostInStall), len(lostBefore), changed, handedAfter),
		fmt.Sprintf("deposed_by_heal=%d", deposed(run, rep)), "faults="+run.faultKinds())
	if len(lostInStall) > 0 {
		t.Logf("leases lost with the witness away only while the machine stalled:\n%s", strings.Join(lostInStall, "\n"))
	}
	if len(lostBefore) > 0 {
		t.Logf("leases already lost to the previous cycle's fault when the witness's began:\n%s", strings.Join(lostBefore, "\n"))
	}
	if len(lost) > 0 {
		t.Errorf("%d leaders lost their lease while only the witness was away:\n%s", len(lost), strings.Join(lost, "\n"))
	}
	if len(excused) > 0 {
		t.Logf("stop lines late only because the machine stalled (the leases ended in time):\n%s", strings.Join(excused, "\n"))
	}
	w.lateHeals(run)
	if len(slow) > 0 {
		t.Errorf("%d leaders without a quorum did not step down within L+H = %s:\n%s", len(slow), tm.L()+tm.H, strings.Join(slow, "\n"))
	}
}

func TestLeaderlessGaps(t *testing.T) {
	at := func(ms int64) int64 { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond).UnixNano() }
	rep := &journalcheck.Report{Intervals: []journalcheck.Interval{
		{ID: "gw2", Term: 1, Start: at(0), End: at(150)},
		{ID: "gw2", Term: 2, Start: at(400), End: at(700)},
		{ID: "gw1", Term: 3, Start: at(750), End: at(2000)},
	}}
	from, to := time.Unix(0, at(100)), time.Unix(0, at(1000))
	got := leaderlessGaps(rep, from, to)
	want := [][2]time.Duration{{50 * time.Millisecond, 300 * time.Millisecond}, {600 * time.Millisecond, 650 * time.Millisecond}}
	if !slices.Equal(got, want) {
		t.Fatalf("gaps %v, want %v", got, want)
	}
	if got := leaderlessGaps(rep, time.Unix(0, at(1900)), time.Unix(0, at(2100))); !slices.Equal(got, [][2]time.Duration{{100 * time.Millisecond, 200 * time.Millisecond}}) {
		t.Fatalf("trailing gap %v", got)
	}
	if got := leaderlessGaps(rep, time.Unix(0, at(800)), time.Unix(0, at(900))); len(got) != 0 {
		t.Fatalf("covered span has gaps %v", got)
	}
}

// The classification of the witness faults. The chaos run of 2026-12-06
// failed on a lease that had run out 1.2 ms before a killed witness's exit
// was seen, after a 158 ms drop of what the leader received, whose heal
// came too late for the next acknowledgements: the cycle had begun on a
// lease not renewed since the previous fault (freshLease now waits for
// one). A lease held when the fault is applied and lost before the heal
// still counts as lost, however soon.
func TestWitnessFaultOutcome(t *testing.T) {
	at := func(ms int64) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	ns := func(ms int64) int64 { return at(ms).UnixNano() }
	rep := &journalcheck.Report{Intervals: []journalcheck.Interval{
		{ID: "gw2", Term: 5, Start: ns(0), End: ns(1000)},
		{ID: "gw2", Term: 6, Start: ns(1100), End: ns(5000)},
	}}
	es := []agent.JournalEntry{{T: ns(4000), ID: "gw2", Event: "stop", Term: 6, Reason: "handing over"}}
	before5 := harness.Agreement{Leader: "gw2", Term: 5}
	before6 := harness.Agreement{Leader: "gw2", Term: 6}
	fault := func(apply, cut, heal int64, before, after harness.Agreement) witFault {
		return witFault{applyAt: at(apply), cutAt: at(cut), healAt: at(heal), before: before, after: after}
	}
	for _, tc := range []struct {
		name string
		f    witFault
		want int
	}{
		{"lease gone before the fault", fault(1001, 1002, 1500, before5, harness.Agreement{Leader: "gw2", Term: 6, At: at(1600)}), witLostBefore},
		{"lease gone after the kill, before its exit was seen", fault(990, 1002, 1500, before5, harness.Agreement{Leader: "gw2", Term: 6, At: at(1600)}), witLost},
		{"kept", fault(1200, 1201, 3000, before6, before6), witKept},
		{"kept, by another than the agreement before named", fault(1200, 1201, 3000, harness.Agreement{Leader: "gw1", Term: 4}, before6), witKept},
		{"kept, another term after", fault(1200, 1201, 3000, before6, harness.Agreement{Leader: "gw1", Term: 7, At: at(3100)}), witChanged},
		{"kept, handed over after the heal", fault(1200, 1201, 3000, before6, harness.Agreement{Leader: "gw1", Term: 7, At: at(4500)}), witHandedAfter},
		{"lost during the fault", fault(500, 501, 2000, before5, harness.Agreement{Leader: "gw2", Term: 6, At: at(2100)}), witLost},
		{"handed over during the fault", fault(3500, 3501, 6000, before6, harness.Agreement{Leader: "gw1", Term: 7, At: at(6100)}), witHanded},
	} {
		if got := witnessFaultOutcome(rep, es, &tc.f); got != tc.want {
			t.Errorf("%s: outcome %d, want %d", tc.name, got, tc.want)
		}
	}
}
