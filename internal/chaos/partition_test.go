package chaos

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
)

// linkFault is a fault on one agent's link to its server.
type linkFault struct {
	name  string
	apply func(p *Proxy)
}

var linkFaults = []linkFault{
	{"cut", func(p *Proxy) { p.Cut() }},
	{"blackhole", func(p *Proxy) { p.BlackHole() }},
	{"oneway-up", func(p *Proxy) { p.CutOneWay(Up) }},     // it cannot speak; held bytes arrive on heal
	{"oneway-down", func(p *Proxy) { p.CutOneWay(Down) }}, // it cannot hear
	{"drop-up", func(p *Proxy) { _ = p.Drop(Up, 1) }},     // its messages are lost, the connection lives
	{"drop-down", func(p *Proxy) { _ = p.Drop(Down, 1) }},
}

// partition is one fault of the partition scenario.
type partition struct {
	kind     string
	isolated map[string]bool // agents whose link is faulted: they exchange nothing both ways
	split    bool            // the route is cut: A and B agents cannot talk
	delay    bool            // a delay fault: whether the leader keeps its lease is not predictable
	cutAt    time.Time
	healAt   time.Time
	hold     time.Duration
	leader   string // the leader (by /status) just before the fault
	after    harness.Agreement
}

// keepsQuorum reports whether agent id can still exchange messages both ways
// with a quorum (itself included) under p.
func (p *partition) keepsQuorum(id string, ids []string) bool {
	if p.isolated[id] {
		return false
	}
	n := 0
	for _, o := range ids {
		if !p.isolated[o] && (!p.split || sideA[o] == sideA[id]) {
			n++
		}
	}
	return n >= len(ids)/2+1
}

// newPartition picks a fault: the leader isolated (six ways), a 3|2 split of
// the bus (reset or silent), a split with a member of the majority also cut
// off (no side has a quorum), a follower's link faulted, or the leader's
// link slowed down.
func (w *world) newPartition(r *rand.Rand, leader string) *partition {
	p := &partition{isolated: map[string]bool{}, leader: leader}
	var followers []string
	for _, id := range w.ids {
		if id != leader {
			followers = append(followers, id)
		}
	}
	var do []func()
	switch r.IntN(10) {
	case 0, 1, 2: // the leader's link, 3 in 10
		lf := pick(r, linkFaults)
		p.kind = "leader-" + lf.name
		p.isolated[leader] = true
		do = append(do, func() { lf.apply(w.proxies[leader]) })
	case 3:
		p.kind, p.split = "split-cut", true
		do = append(do, w.bus.Route.Cut)
	case 4:
		p.kind, p.split = "split-blackhole", true
		do = append(do, w.bus.Route.BlackHole)
	case 5:
		victim := pick(r, []string{"gw1", "gw2", "gw3"})
		lf := pick(r, linkFaults)
		p.kind, p.split = "split+"+victim+"-"+lf.name, true
		p.isolated[victim] = true
		do = append(do, w.bus.Route.BlackHole, func() { lf.apply(w.proxies[victim]) })
	case 6, 7:
		victim := pick(r, followers)
		lf := pick(r, linkFaults)
		p.kind = "follower-" + lf.name
		p.isolated[victim] = true
		do = append(do, func() { lf.apply(w.proxies[victim]) })
	case 8:
		// Two followers cut off: the leader keeps exactly a quorum.
		a, b := followers[r.IntN(len(followers))], ""
		for b == "" || b == a {
			b = pick(r, followers)
		}
		lf := pick(r, linkFaults)
		p.kind = "two-followers-" + lf.name
		p.isolated[a], p.isolated[b] = true, true
		do = append(do, func() { lf.apply(w.proxies[a]); lf.apply(w.proxies[b]) })
	case 9:
		// A slow leader link: each way delayed by H/2..2H with jitter. A round
		// trip longer than L costs the lease.
		base := between(r, w.tm.H/2, 2*w.tm.H)
		p.kind, p.delay = fmt.Sprintf("leader-delay-%s", base.Round(time.Millisecond)), true
		do = append(do, func() { w.proxies[leader].Delay(Both, base, w.tm.H/2) })
	}
	// Hold it: a quarter are blips shorter than L+H, a tenth are long enough
	// for NATS pings to give up on a silent connection (2 s interval, 2
	// outstanding), the rest in between.
	switch x := r.IntN(20); {
	case x < 5:
		p.hold = between(r, w.tm.H/2, w.tm.L()+w.tm.H)
	case x < 18:
		p.hold = between(r, w.tm.L()+w.tm.H, 2500*time.Millisecond)
	default:
		p.hold = between(r, 3*time.Second, 7*time.Second)
	}
	for _, f := range do {
		f()
	}
	// Taken after the faults are in place: the cut happened no later than
	// this, even if this test was descheduled in between, so step-down times
	// measured from it are never flattered.
	p.cutAt = time.Now()
	return p
}

// TestChaosPartitions runs CHAOS_CYCLES random partition/heal cycles over
// five agents and checks, from the agents' journals: no overlapping leases,
// no double votes, no split terms, no term regressions; after every heal one
// leader within D + 1 s; a leader that loses its quorum steps down within
// L + H.
//
// What is measured:
//   - recovery: from the moment the network is whole again until the agents
//     connected to the bus (at least a quorum) report the same leader and
//     that leader reports itself leader (lease checked at call time). An
//     agent whose own link was reset reconnects on its NATS client's backoff
//     (100 ms doubling to 5 s, ±50%), so after a long cut it may rejoin
//     seconds later: that is reported as all_five_rejoined, from the same
//     moment until all five agree. The network is whole at the heal, except
//     after a reset route: nats-server re-forms a torn-down route only after
//     its fixed route reconnect delay (about 1 s, not configurable), and the
//     agents cannot elect over a bus that is not there; that wait is
//     reported apart as bus_reform.
//   - step-down, for every fault that leaves the leader without a quorum and
//     lasts at least L + H: from the fault to the end of the leader's valid
//     lease (its journal's lease interval: the earlier of the "stop" line and
//     the last lease end) as stepdown_lease, and to its "stop" line (the
//     agent noticed, cancelled its duty's context and fired its callbacks)
//     as stepdown_stop. Both must be at most L + H; a late stop line is
//     excused (and counted) only when the lease itself ended in time and the
//     machine was seen to stall meanwhile (see stallWatch).
func TestChaosPartitions(t *testing.T) {
	requireChaos(t)
	start := time.Now()
	cycles := harness.EnvCount(t, "CHAOS_CYCLES", 20)
	// Heals allowed to miss D + 1 s before the test fails: 0 in make chaos.
	// A heal can depose the majority's leader (a member that was cut off
	// returns with a higher term; there is no pre-vote), and a shared CI
	// machine stalls processes for hundreds of milliseconds at times, so
	// make chaos-short allows a few; every miss is listed either way.
	allowedMisses := harness.EnvCount(t, "CHAOS_RECOVERY_MISSES", 0)
	w := newWorld(t, defaultTiming(t), worldOpts{})
	tm := w.tm
	if _, err := w.agree(w.ids, "", 0, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	var (
		parts                           []*partition
		recovery, fromHeal, bus, rejoin samples
		late                            []string
		kinds                           = map[string]int{}
	)
	for i := 0; i < cycles; i++ {
		a, err := w.agree(w.ids, "", 0, 30*time.Second)
		if err != nil {
			t.Fatalf("cycle %d: before the fault: %v", i, err)
		}
		p := w.newPartition(w.rng, a.Leader)
		time.Sleep(p.hold) // hold the fault for its chosen time
		p.healAt = time.Now()
		w.healAll()
		whole := p.healAt
		if p.split && !w.bus.Routed() {
			if err := w.bus.WaitRouted(10 * time.Second); err != nil {
				t.Fatalf("cycle %d (%s): %v", i, p.kind, err)
			}
			whole = time.Now()
			bus = append(bus, whole.Sub(p.healAt))
		}
		c, err := w.agreeConnected(30 * time.Second)
		if err != nil {
			t.Fatalf("cycle %d (%s, held %s): after the heal: %v", i, p.kind, p.hold, err)
		}
		a, err = w.agree(w.ids, "", 0, 30*time.Second)
		if err != nil {
			t.Fatalf("cycle %d (%s, held %s): after the heal: %v", i, p.kind, p.hold, err)
		}
		p.after = a
		rec := c.At.Sub(whole)
		recovery = append(recovery, rec)
		fromHeal = append(fromHeal, c.At.Sub(p.healAt))
		rejoin = append(rejoin, a.At.Sub(whole))
		if rec > tm.D()+time.Second {
			late = append(late, fmt.Sprintf("cycle %d %s held %s: %s (machine stall up to %s meanwhile)",
				i, p.kind, p.hold.Round(time.Millisecond), ms(rec), ms(w.stalls.worst(whole, a.At))))
		}
		parts = append(parts, p)
		kinds[strings.SplitN(p.kind, "-", 2)[0]]++
		t.Logf("cycle %3d at %s: %-28s held %7s leader %s -> %s term %d, recovered in %s",
			i, p.cutAt.Format("15:04:05.000"), p.kind, p.hold.Round(time.Millisecond), p.leader, a.Leader, a.Term, ms(rec))
		w.alive()
	}

	rep, es := w.journals()
	requireSafe(t, rep)

	// Step-down of leaders that lost their quorum.
	var leaseEnd, stopped samples
	var slow, excused []string
	kept, keptOf := 0, 0
	// A leader that still led when the network healed, but not the term
	// agreed on after the heal, was deposed by the heal itself: a member
	// that was cut off comes back with a higher term. Not a safety matter;
	// a measure of churn.
	disrupted := 0
	var finalTerm uint64
	for _, p := range parts {
		finalTerm = p.after.Term
		if iv, ok := leaseAt(rep, p.healAt); ok && p.after.Term != iv.Term {
			disrupted++
		}
	}
	for i, p := range parts {
		iv, ok := leaseAt(rep, p.cutAt)
		if !ok || p.delay {
			continue // no lease at the cut (a hand-over was under way), or unpredictable
		}
		if p.keepsQuorum(iv.ID, w.ids) {
			if p.hold > tm.L()+tm.H {
				keptOf++
				if iv.End > p.healAt.UnixNano() {
					kept++
				}
			}
			continue
		}
		if p.hold < tm.L()+tm.H {
			continue
		}
		d := time.Duration(iv.End - p.cutAt.UnixNano())
		leaseEnd = append(leaseEnd, d)
		st, ok := stopAfter(es, iv.ID, iv.Term, time.Unix(0, iv.Start))
		if !ok {
			slow = append(slow, fmt.Sprintf("cycle %d %s: %s never logged a stop of term %d", i, p.kind, iv.ID, iv.Term))
			continue
		}
		ds := time.Duration(st.T - p.cutAt.UnixNano())
		stopped = append(stopped, ds)
		what := fmt.Sprintf("cycle %d %s: %s lease ended %s and stopped %s (%s) after the fault",
			i, p.kind, iv.ID, ms(d), ms(ds), st.Reason)
		switch stall := w.stalls.worst(p.cutAt, time.Unix(0, st.T)); {
		case d > tm.L()+tm.H:
			slow = append(slow, what) // the lease itself outlived L + H: never excused
		case ds > tm.L()+tm.H && stall >= 100*time.Millisecond:
			// The lease ended in time, but the agent's loop noticed late
			// while the machine was not running processes.
			excused = append(excused, fmt.Sprintf("%s; machine stall of %s meanwhile", what, ms(stall)))
		case ds > tm.L()+tm.H:
			slow = append(slow, what)
		}
	}
	var ks []string
	for k, n := range kinds {
		ks = append(ks, fmt.Sprintf("%s:%d", k, n))
	}
	sort.Strings(ks)
	summary(t, "partitions", w, start,
		fmt.Sprintf("cycles=%d", cycles), safety(rep),
		recovery.p50max("recovery"), fmt.Sprintf("recovery_over_D+1s=%d", len(late)),
		fromHeal.p50max("recovery_from_heal"), bus.p50max("bus_reform"), rejoin.p50max("all_five_rejoined"),
		leaseEnd.p50max("stepdown_lease"), stopped.p50max("stepdown_stop"),
		fmt.Sprintf("stepdown_over_L+H=%d stop_late_in_machine_stall=%d", len(slow), len(excused)),
		fmt.Sprintf("majority_leader_kept=%d/%d", kept, keptOf),
		fmt.Sprintf("deposed_by_heal=%d", disrupted), fmt.Sprintf("final_term=%d", finalTerm),
		"faults="+strings.Join(ks, ","))
	if len(excused) > 0 {
		t.Logf("stop lines late only because the machine stalled (the leases ended in time):\n%s", strings.Join(excused, "\n"))
	}
	if len(late) > 0 {
		msg := fmt.Sprintf("%d heals not followed by one leader within D+1s = %s:\n%s", len(late), tm.D()+time.Second, strings.Join(late, "\n"))
		if len(late) > allowedMisses {
			t.Error(msg)
		} else {
			t.Logf("%s\n(within CHAOS_RECOVERY_MISSES=%d)", msg, allowedMisses)
		}
	}
	if len(slow) > 0 {
		t.Errorf("%d leaders without a quorum did not step down within L+H = %s:\n%s", len(slow), tm.L()+tm.H, strings.Join(slow, "\n"))
	}
}
